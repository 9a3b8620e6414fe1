/**
 * One look of signal mode at the process table: which processes are the
 * workload's targets (by name, lib/enforce/target.ts), which are never
 * signalled (PID 1, the sidecar, its parent, a copy of this program, the
 * dead), and which others the targets brought along
 * (lib/enforce/workload_set.ts). Reading the table is kept apart from
 * judging what it shows.
 *
 * @module
 */
import { isDead, type ProcessInfo, type ProcessTable } from "./proc.ts";
import { matchesTarget } from "./target.ts";
import type { WorkloadSet } from "./workload_set.ts";

/** Options for {@linkcode WorkloadScanner}. */
export interface WorkloadScannerOptions {
  /** The workload's executable basename (`BERTH_SIGNAL_TARGET`). */
  target: string;
  /** Where the processes are listed. */
  processTable: ProcessTable;
  /** Copies of this program a process may run, compared by file identity; see `SignalEnforcerOptions.ownCopies`. */
  ownCopies: string[];
  /** What the targets brought along; the targets each scan finds are remembered in it. */
  workload: WorkloadSet;
}

/** What one listing of the process table holds for signal mode. */
export interface WorkloadScan {
  /** The listing itself. */
  procs: ProcessInfo[];
  /** The sidecar itself in the listing; `undefined` when the listing does not show it. */
  self: ProcessInfo | undefined;
  /** The targets that may be signalled, in the listing's order. */
  targets: ProcessInfo[];
  /** Live processes of the workload with another name that may be signalled, in the listing's order. */
  others: ProcessInfo[];
}

/** Finds the workload in the process table; see the module doc. */
export class WorkloadScanner {
  #o: WorkloadScannerOptions;
  /** File identities of this program and its {@linkcode WorkloadScannerOptions.ownCopies}. */
  #ownIds = new Set<string>();

  /**
   * Nothing is read until the first {@linkcode WorkloadScanner.read}.
   *
   * @param options See {@linkcode WorkloadScannerOptions}.
   */
  constructor(options: WorkloadScannerOptions) {
    this.#o = options;
  }

  /**
   * Reads the file identities of this program and its copies again (a copy
   * can be reinstalled), then lists the process table.
   *
   * @returns One listing of the process table.
   * @throws {Error} When the file identities or the table cannot be read.
   */
  async read(): Promise<ProcessInfo[]> {
    const t = this.#o.processTable;
    const ids = await Promise.all(
      [t.selfExe, ...this.#o.ownCopies].map((p) => t.fileId(p)),
    );
    this.#ownIds = new Set(ids.filter((id): id is string => id !== undefined));
    return await t.list();
  }

  /**
   * Whether `p` is never signalled: PID 1, this sidecar, its parent, a
   * process running its executable or a copy of it (where its
   * `/proc/PID/exe` can be examined, as of the last
   * {@linkcode WorkloadScanner.read}), the dead.
   *
   * @param p A process of the table.
   * @returns True when `p` must not be signalled.
   */
  spared(p: ProcessInfo): boolean {
    const t = this.#o.processTable;
    return p.pid === 1 || p.pid === t.selfPid || p.pid === t.parentPid ||
      (p.exeId !== undefined && this.#ownIds.has(p.exeId)) || isDead(p);
  }

  /**
   * Whether `p` is a target that may be signalled.
   *
   * @param p A process of the table.
   * @returns True when `p` matches the target and is not spared.
   */
  isTarget(p: ProcessInfo): boolean {
    return !this.spared(p) && matchesTarget(p, this.#o.target);
  }

  /**
   * Judges one listing: remembers the targets it holds in the workload set,
   * then finds what they (and the targets remembered before) brought along.
   *
   * @param procs A listing from {@linkcode WorkloadScanner.read}.
   * @returns The targets and the others, none of them spared.
   */
  scan(procs: ProcessInfo[]): WorkloadScan {
    const { processTable, workload } = this.#o;
    const selfPid = processTable.selfPid;
    const self = procs.find((q) => q.pid === selfPid);
    const targets = procs.filter((p) => this.isTarget(p));
    for (const p of targets) workload.remember(p, self);
    const isTarget = new Set(targets.map((p) => p.pid));
    const others = workload.members(
      procs,
      selfPid,
      (p) => isTarget.has(p.pid) || this.spared(p),
    );
    return { procs, self, targets, others };
  }
}
