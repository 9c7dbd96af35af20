/**
 * System tools (util-linux `setpriv`, `unshare`) as every sandboxed process of the agent finds them:
 * one lookup for engines and function workers alike, at an absolute path from a fixed list of system
 * directories, never the agent's PATH. It lives in host-agent/functions/launch.ts, where the function
 * runtime first needed it; the sandbox's modules take it from here.
 */
export { systemTool } from '../functions/launch.ts';
