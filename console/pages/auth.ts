/**
 * Sign up and sign in (docs/console.md "Session"): an account id and its secret. Sign-up shows the
 * secret once, with copy buttons, before the console goes on; the tab keeps only the session.
 */
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import type { SignedUp } from '../../client/index.ts';
import { navigate } from '../router.ts';
import { apiClient, saveSession } from '../session.ts';
import { CopyButton, ErrorBox, useAction } from '../ui.ts';

/** `#/signin`. */
export function SignIn({ onSignedIn, notice }: { onSignedIn: () => void; notice: string | null }): VNode {
  const [accountId, setAccountId] = useState('');
  const [secret, setSecret] = useState('');
  const signIn = useAction(
    async () => {
      const session = await apiClient(null).createSession({ account_id: accountId.trim(), account_secret: secret.trim() });
      saveSession({ token: session.token, accountId: accountId.trim(), expiresAt: session.expires_at });
      setSecret('');
      onSignedIn();
      navigate({ page: 'projects' });
    },
    { sessionCall: false },
  );
  return html`<div class="narrow" data-test="page-signin">
    <h1>Sign in</h1>
    ${notice ? html`<div class="notice" data-test="notice">${notice}</div>` : null}
    <form class="stack" onSubmit=${(e: Event) => (e.preventDefault(), void signIn.run())}>
      <label>Account id<input name="account_id" autocomplete="username" placeholder="acct_…" value=${accountId} onInput=${(e: Event) => setAccountId((e.target as HTMLInputElement).value)} required /></label>
      <label>Account secret<input name="account_secret" type="password" autocomplete="current-password" value=${secret} onInput=${(e: Event) => setSecret((e.target as HTMLInputElement).value)} required /></label>
      <div class="row"><button class="primary" type="submit" disabled=${signIn.busy} data-test="signin-submit">${signIn.busy ? 'Signing in…' : 'Sign in'}</button></div>
    </form>
    <${ErrorBox} error=${signIn.error} />
    <p class="muted">No account yet? <a href="#/signup" data-test="to-signup">Sign up</a></p>
  </div>`;
}

/** `#/signup`. */
export function SignUp({ onSignedIn }: { onSignedIn: () => void }): VNode {
  const [name, setName] = useState('');
  const [invite, setInvite] = useState('');
  const [account, setAccount] = useState<SignedUp | null>(null);
  const signUp = useAction(
    async () => {
      const created = await apiClient(null).signup({ ...(name.trim() ? { name: name.trim() } : {}), ...(invite.trim() ? { invite_code: invite.trim() } : {}) });
      saveSession({ token: created.token, accountId: created.account_id, expiresAt: created.expires_at });
      setAccount(created);
    },
    { sessionCall: false },
  );
  if (account) {
    return html`<div class="narrow" data-test="page-signed-up">
      <h1>Your account</h1>
      <div class="once stack">
        <strong>Save the account secret now: it is shown only this once.</strong>
        <div>Account id <code data-test="account-id">${account.account_id}</code> <${CopyButton} text=${account.account_id} test="copy-account-id" /></div>
        <div>Account secret <code data-test="account-secret">${account.account_secret}</code> <${CopyButton} text=${account.account_secret} test="copy-account-secret" /></div>
        <p class="muted">You sign in again with these two. The service keeps only a verifier of the secret and cannot show it again.</p>
      </div>
      <button class="primary" onClick=${() => (onSignedIn(), navigate({ page: 'projects' }))} data-test="signup-continue">I saved it — continue</button>
    </div>`;
  }
  return html`<div class="narrow" data-test="page-signup">
    <h1>Sign up</h1>
    <form class="stack" onSubmit=${(e: Event) => (e.preventDefault(), void signUp.run())}>
      <label>Name (optional)<input name="name" value=${name} onInput=${(e: Event) => setName((e.target as HTMLInputElement).value)} maxlength="64" /></label>
      <label>Invite code (if the service asks for one)<input name="invite_code" value=${invite} onInput=${(e: Event) => setInvite((e.target as HTMLInputElement).value)} /></label>
      <div class="row"><button class="primary" type="submit" disabled=${signUp.busy} data-test="signup-submit">${signUp.busy ? 'Creating…' : 'Create account'}</button></div>
    </form>
    <${ErrorBox} error=${signUp.error} />
    <p class="muted">Have an account? <a href="#/signin" data-test="to-signin">Sign in</a></p>
  </div>`;
}
