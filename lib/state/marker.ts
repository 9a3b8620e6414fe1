/**
 * The health marker and all the probe needs to judge it and say why, Go's
 * `Duration.String` included, so the webhook's `check` loads this module
 * alone. Besides the mtime upstream checks, the marker holds when the
 * workload's permission to run closes, on the node's boot-time clock (the same
 * in every container) and the wall clock, so the probe fails on time even when
 * the sidecar is dead. That content only makes the verdict stricter.
 *
 * @module
 */
/** Why a state file was refused or could not be read; `detail` omits the path, so the probe's line names it once. */
export class StateFileError extends Error {
  constructor(readonly path: string, readonly detail: string) {
    super(`${path}: ${detail}`);
    this.name = "StateFileError";
  }
}

/** The file-type bits of an lstat result. */
export type FileKind =
  & Pick<Deno.FileInfo, "isFile" | "isDirectory" | "isSymlink">
  & Partial<
    Pick<
      Deno.FileInfo,
      "isFifo" | "isSocket" | "isCharDevice" | "isBlockDevice"
    >
  >;

/** What a state file is instead of a regular file, and what to do: a refusal must say why a file the operator sees was not accepted. */
export function describeNonRegular(info: FileKind): string {
  const kind = info.isSymlink
    ? "a symbolic link, which is never followed"
    : `${
      info.isDirectory
        ? "a directory, not"
        : info.isFifo
        ? "a named pipe, not"
        : info.isSocket
        ? "a socket, not"
        : info.isCharDevice || info.isBlockDevice
        ? "a device, not"
        : "not"
    } a regular file`;
  return `is ${kind} (only berth-acquire writes the state volume; remove it and let the helper rewrite it)`;
}

/** Text of a small file: ASCII (all this tool writes) without a `TextDecoder`, which the probe then never loads. */
function decodeSmallText(bytes: Uint8Array): string {
  for (const b of bytes) {
    if (b >= 0x80) return new TextDecoder().decode(bytes);
  }
  return String.fromCharCode(...bytes);
}

const OPEN_ATTEMPTS = 3;

/**
 * A small regular file's bytes (`undefined`: absent; no bytes: not a regular
 * file), or a `StateFileError`. No symlink is followed (Deno has no
 * `O_NOFOLLOW`): only what lstat calls a regular file is opened, and it must
 * be the same file (else, renamed over, it is looked at again); a FIFO swapped
 * in between can only make `open` block, which the probe's timeout fails.
 */
export function readSmallFileNoFollow(
  path: string,
  maxBytes: number,
  what: string,
): { info: Deno.FileInfo; bytes?: Uint8Array } | undefined {
  const error = (detail: string) => new StateFileError(path, detail);
  const tooLarge = (size: number) =>
    error(
      `is ${size} bytes or more, larger than any ${what} berth-acquire writes (limit ${maxBytes} bytes); remove it and let the helper rewrite it`,
    );
  for (let attempt = 1;; attempt++) {
    let doing = "examine";
    let file: Deno.FsFile | undefined;
    try {
      const linfo = Deno.lstatSync(path);
      if (!linfo.isFile) return { info: linfo };
      doing = "open";
      file = Deno.openSync(path);
      doing = "read";
      const info = file.statSync();
      if (info.dev !== linfo.dev || info.ino !== linfo.ino) {
        if (attempt < OPEN_ATTEMPTS) continue;
        throw error(
          `kept changing while it was opened (${OPEN_ATTEMPTS} attempts); another process is replacing the ${what}`,
        );
      }
      if (info.size > maxBytes) throw tooLarge(info.size);
      // One byte more than allowed catches a file that grew since fstat.
      const buf = new Uint8Array(maxBytes + 1);
      let n = 0;
      for (let got; n < buf.length && (got = file.readSync(buf.subarray(n)));) {
        n += got;
      }
      if (n > maxBytes) throw tooLarge(n);
      return { info, bytes: buf.slice(0, n) };
    } catch (e) {
      if (e instanceof StateFileError) throw e;
      if (e instanceof Deno.errors.NotFound && doing !== "read") return;
      throw error(`cannot ${doing} the ${what}: ${(e as Error).message}`);
    } finally {
      file?.close();
    }
  }
}

/**
 * The boot-time clock in ms, from `/proc/uptime` (10 ms steps), or throws.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const deadlineBootMs = readBootMillis() + 30_000;
 * assert.ok(deadlineBootMs > 30_000);
 * ```
 */
export function readBootMillis(): number {
  const text = Deno.readTextFileSync("/proc/uptime");
  const field = text.split(/[ \n]/, 1)[0];
  // Number("") is 0: an empty file must not read as "just booted".
  if (!/^\d+(?:\.\d+)?$/.test(field)) {
    throw new Error(
      `cannot read the boot-time clock from /proc/uptime: ${
        JSON.stringify(text)
      }`,
    );
  }
  return Math.round(Number(field) * 1000);
}

/**
 * When the permission closes (the enforcement lead before the lease deadline)
 * and the lease deadline, since boot and since the epoch (LXCFS: not shared).
 */
export interface MarkerDeadlines {
  gateClosesBootMs: number;
  leaseDeadlineBootMs: number;
  gateClosesWallMs?: number;
  leaseDeadlineWallMs?: number;
}

/** The first line of this helper's markers. */
export const HEADER = "berth-acquire health marker v1";

const FIELDS = [
  ["gate_closes_boottime_ms", "gateClosesBootMs"],
  ["lease_deadline_boottime_ms", "leaseDeadlineBootMs"],
  ["gate_closes_wall_ms", "gateClosesWallMs"],
  ["lease_deadline_wall_ms", "leaseDeadlineWallMs"],
] as const;

/** The marker's content: the header, then a `name=ms` line a deadline; the header alone without deadlines (startup-gate mode: nobody renews). */
export function formatMarker(d: MarkerDeadlines | undefined): string {
  let out = `${HEADER}\n`;
  for (const [name, key] of FIELDS) {
    if (d?.[key] !== undefined) out += `${name}=${Math.floor(d[key])}\n`;
  }
  return out;
}

/**
 * A marker's deadlines, `undefined` for content not ours (the Go helper's) or
 * our header alone; throws on ours malformed, so the probe fails closed.
 */
export function parseMarker(text: string): MarkerDeadlines | undefined {
  if (!text.startsWith(HEADER + "\n")) return undefined;
  const fields = new Map<string, string>();
  for (const line of text.slice(HEADER.length + 1).split("\n")) {
    if (line === "") continue;
    const eq = line.indexOf("=");
    if (eq <= 0) {
      throw new Error(`malformed marker line ${JSON.stringify(line)}`);
    }
    fields.set(line.slice(0, eq), line.slice(eq + 1));
  }
  if (fields.size === 0) return undefined;
  const d: Partial<MarkerDeadlines> = {};
  for (const [i, [name, key]] of FIELDS.entries()) {
    const v = fields.get(name);
    if (v === undefined && i >= 2) continue;
    if (v === undefined || !/^\d{1,16}$/.test(v)) {
      throw new Error(
        `marker field ${name} is missing or not a whole number of milliseconds`,
      );
    }
    d[key] = Number(v);
  }
  return d as MarkerDeadlines;
}

/** The webhook's probe argv has `--max-age 30s`: `status` judges so, the sidecar refreshes within it. */
export const WEBHOOK_PROBE_MAX_AGE_MS = 30_000;

/** {@linkcode WEBHOOK_PROBE_MAX_AGE_MS} as the webhook's argv writes it. */
export const WEBHOOK_PROBE_MAX_AGE = "30s";

/** The largest marker read; ours is under 100 bytes. */
export const MARKER_MAX_BYTES = 4096;

/** Apart for the operator: `Absent` is a failover, `Stale` an incident (nobody refreshed it), `Indeterminate` unexaminable. */
export type VerdictKind = "OK" | "Absent" | "Stale" | "Indeterminate";

/** A verdict and, unless `OK`, the one line the probe prints. */
export type Verdict =
  | { kind: "OK" }
  | { kind: Exclude<VerdictKind, "OK">; reason: string };

export type MarkerStat = FileKind & Pick<Deno.FileInfo, "mtime">;

/** What examining the marker found: its lstat or why there is none (`NotFound`: absent), and a regular file's content. */
export interface MarkerObservation {
  stat: MarkerStat | Error;
  content: string | null;
}

/** The path for the line, the clocks (the boot clock read only for a deadline; it may throw), the age limit (0: none). */
export interface JudgeOptions {
  path: string;
  wallNowMs: number;
  bootNowMs: () => number;
  maxAgeMs: number;
}

/** Formats milliseconds as Go's `Duration.String()` does, so messages read like the flags the operator wrote. */
export function formatDurationMs(ms: number): string {
  if (ms === 0) return "0s";
  const neg = ms < 0;
  let rest = Math.abs(Math.round(ms));
  if (rest < 1000) return `${neg ? "-" : ""}${rest}ms`;
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const m = Math.floor(rest / 60_000);
  rest -= m * 60_000;
  const s = Math.floor(rest / 1000);
  const frac = rest - s * 1000;
  let out = `${s}${
    frac ? "." + String(frac).padStart(3, "0").replace(/0+$/, "") : ""
  }s`;
  if (h > 0) out = `${h}h${m}m${out}`;
  else if (m > 0) out = `${m}m${out}`;
  return (neg ? "-" : "") + out;
}

/**
 * An age in reason lines: whole seconds as the Go helper rounds them, below a
 * second ms; over `overLimitMs` but rounding to it, up to 100 ms (`15.1s`).
 */
export function shownMs(ms: number, overLimitMs?: number): string {
  const whole = Math.max(0, Math.floor(ms));
  if (whole < 1000) return formatDurationMs(whole);
  const rounded = Math.round(ms / 1000) * 1000;
  if (overLimitMs !== undefined && rounded <= overLimitMs) {
    return formatDurationMs(Math.ceil(ms / 100) * 100);
  }
  return formatDurationMs(rounded);
}

/**
 * The probe's verdict, without I/O. In order: absent; not examinable or not
 * a regular file (Indeterminate); older than the limit (Stale, upstream's
 * line); content that claims to be ours but is malformed (Indeterminate);
 * the permission's closing time passed on the boot-time clock, or on the wall
 * clock (Stale). Equal to the limit or the deadline passes.
 */
export function judgeMarker(
  obs: MarkerObservation,
  opts: JudgeOptions,
): Verdict {
  const { path } = opts;
  const stat = obs.stat;
  const indeterminate = (detail: string): Verdict => ({
    kind: "Indeterminate",
    reason: `health marker indeterminate: ${path}: ${detail}`,
  });
  if (stat instanceof Deno.errors.NotFound) {
    return { kind: "Absent", reason: `health marker absent: ${path}` };
  }
  if (stat instanceof Error) {
    return indeterminate(
      stat instanceof StateFileError && stat.path === path
        ? stat.detail
        : stat.message,
    );
  }
  if (stat.isDirectory && !/(^|\/)healthy\/*$/.test(path)) {
    // A slip (status takes the directory, check the file): no advice to remove.
    return indeterminate(
      `is a directory, not the health marker file: did you mean ${
        path.replace(/\/+$/, "")
      }/healthy?`,
    );
  }
  if (!stat.isFile || stat.isSymlink || stat.isDirectory) {
    return indeterminate(describeNonRegular(stat));
  }
  if (stat.mtime === null) {
    return indeterminate("the file system reports no modification time");
  }
  const age = opts.wallNowMs - stat.mtime.getTime();
  if (opts.maxAgeMs > 0 && age > opts.maxAgeMs) {
    return {
      kind: "Stale",
      reason: `health marker stale: ${path} not refreshed for ${
        shownMs(age, opts.maxAgeMs)
      } (limit ${
        formatDurationMs(opts.maxAgeMs)
      }); the lease sidecar is not renewing`,
    };
  }
  if (obs.content === null) return indeterminate("its content was not read");
  let d: MarkerDeadlines | undefined;
  let boot: number;
  try {
    d = parseMarker(obs.content);
  } catch (e) {
    return indeterminate(
      `${(e as Error).message} (the content claims to be berth-acquire's ` +
        "but is malformed; remove the file and let the lease sidecar rewrite it)",
    );
  }
  if (d === undefined) return { kind: "OK" };
  try {
    boot = opts.bootNowMs();
  } catch (e) {
    return indeterminate((e as Error).message);
  }
  const late = boot - d.gateClosesBootMs;
  const lateWall = opts.wallNowMs - (d.gateClosesWallMs ?? Infinity);
  // One moment's copies differ by read skew and /proc/uptime's 10 ms steps:
  // only a second left on the boot clock means the clocks disagree.
  if (late > 0 || (lateWall > 0 && late > -1000)) {
    return {
      kind: "Stale",
      reason: `health marker stale: ${path} gate deadline passed ${
        shownMs(late > 0 ? late : lateWall)
      } ago (gate_closes_${
        late > 0 ? "boottime" : "wall"
      }_ms in the marker); the lease sidecar has not confirmed the lease or cannot write the marker (its log says which)`,
    };
  }
  if (lateWall > 0) {
    return {
      kind: "Stale",
      reason: `health marker stale: ${path} gate deadline passed ${
        shownMs(lateWall)
      } ago on the wall clock (gate_closes_wall_ms in the marker) with ${
        shownMs(-late)
      } left on the boot-time clock: either this container's boot-time clock is not the sidecar's (LXCFS) and the sidecar has not confirmed the lease (its log says why), or this node's wall clock stepped forward (the next renewal writes a new marker)`,
    };
  }
  return { kind: "OK" };
}

/** What examining the marker at `path` finds (no symlink followed, at most {@linkcode MARKER_MAX_BYTES} read); never throws. */
export function observeMarker(path: string): MarkerObservation {
  try {
    const r = readSmallFileNoFollow(path, MARKER_MAX_BYTES, "health marker");
    if (r === undefined) {
      return { stat: new Deno.errors.NotFound(path), content: null };
    }
    return { stat: r.info, content: r.bytes ? decodeSmallText(r.bytes) : null };
  } catch (e) {
    return { stat: e as Error, content: null };
  }
}

/** The probe's verdict on the marker at `path` now, the one check, gate and the simulator ask; never throws (a probe fails closed). */
export function examineMarker(
  path: string,
  opts: { maxAgeMs: number },
): Verdict {
  return judgeMarker(observeMarker(path), {
    path,
    wallNowMs: Date.now(),
    bootNowMs: readBootMillis,
    maxAgeMs: opts.maxAgeMs,
  });
}

/**
 * The probe's answer (`check`): exit status 0 when the marker at `path`
 * passes, else 1 with the verdict's line on stdout, which the kubelet shows in
 * the pod's events.
 */
export function probe(path: string, maxAgeMs: number): number {
  const verdict = examineMarker(path, { maxAgeMs });
  if (verdict.kind === "OK") return 0;
  console.log(verdict.reason);
  return 1;
}
