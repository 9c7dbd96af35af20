/**
 * Snapshots in use (docs/lifecycle.md "Deleting a snapshot"): a restore holds its snapshot from the
 * moment it is asked for (queued or running) until it is done, a snapshot being taken holds its new
 * id until it is recorded. Deleting a held snapshot is refused at once (409 `conflict`) rather than
 * queued behind the operation that uses it. Memory only: a restart ends every operation anyway.
 */

/** Which snapshots of which projects an operation uses right now. */
export class SnapshotHolds {
  readonly #held = new Map<string, Map<string, number>>();

  /** Marks `snapshotId` of the project in use; answers the release (idempotent). */
  hold(projectId: string, snapshotId: string): () => void {
    const project = this.#held.get(projectId) ?? new Map<string, number>();
    this.#held.set(projectId, project);
    project.set(snapshotId, (project.get(snapshotId) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (project.get(snapshotId) ?? 1) - 1;
      if (left > 0) project.set(snapshotId, left);
      else project.delete(snapshotId);
      if (project.size === 0 && this.#held.get(projectId) === project) this.#held.delete(projectId);
    };
  }

  /** Whether an operation uses `snapshotId` of the project. */
  held(projectId: string, snapshotId: string): boolean {
    return (this.#held.get(projectId)?.get(snapshotId) ?? 0) > 0;
  }

  /** Whether any operation uses a snapshot of the project (a restore asked for, a snapshot being taken). */
  busy(projectId: string): boolean {
    return this.#held.has(projectId);
  }
}
