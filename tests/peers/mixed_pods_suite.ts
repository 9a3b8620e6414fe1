/**
 * Part (d) of the peer tier: the four ways to mix the Go helper and this one
 * in a pod (init container `acquire` of one kind, sidecar `renew` of the
 * other, and both same-kind pairs as controls), against the upstream API
 * server through a recording proxy:
 *
 * 1. pod A's init acquires; its sidecar adopts the handoff through the shared
 *    state directory and renews with the init's token;
 * 2. A's sidecar is frozen (SIGSTOP) while pod B (an init of the same kind as
 *    A's) waits for the lease; B gets it once A's lease expires;
 * 3. A's workload probe, as the webhook runs it (`<state>/check check
 *    <state>/healthy --max-age M`, the `check` the init installed), is run
 *    over and over: how long it keeps passing after B got the lease is the
 *    time two workloads run at once;
 * 4. A's sidecar is resumed; it must notice the loss and fail A's probe.
 *
 * The adoption must work in every combination; two workloads at once must
 * not happen when both halves are this project's. The overlap of the other
 * combinations is measured and printed: it is a fact about the Go half, which
 * judges the marker by its mtime alone.
 *
 * @module
 */
import assert from "node:assert/strict";
import { type HelperKind, PeerProcess, runHelper } from "./helpers.ts";
import { type PeerServer, startRealServer, TEAM } from "./peers.ts";
import {
  type RecordedRequest,
  startRecordingProxy,
} from "./recording_proxy.ts";
import { readStateFile, tempDir } from "../support/lease_env.ts";
import { waitFor } from "../support/wait.ts";

/** Lease TTL of the mixed pods (seconds): the smallest this helper accepts with a 1 s heartbeat, plus one. */
export const MIXED_TTL_SECONDS = 6;

/**
 * The probe's `--max-age`: `BERTH_PEER_PROBE_MAX_AGE`, default `10s`. The
 * webhook's own is `30s`; a shorter one keeps the tier fast and the overlap
 * of a Go half is then about max-age minus TTL.
 */
export const PROBE_MAX_AGE: string = Deno.env.get("BERTH_PEER_PROBE_MAX_AGE") ??
  "10s";

/** What one combination showed. */
export interface MixedOutcome {
  /** Init container kind. */
  init: HelperKind;
  /** Sidecar kind. */
  sidecar: HelperKind;
  /** The sidecar renewed with the init's holder and token. */
  adopted: boolean;
  /** The sidecar's first renew body, as sent. */
  renewBody?: string;
  /** ms from B's successful acquire to the first failing probe of A (negative: A's probe failed before). */
  overlapMs: number;
  /** ms from B's successful acquire to the last passing probe of A, if any passed after it. */
  lastPassAfterMs?: number;
  /** The reason line of A's first failing probe. */
  failLine: string;
  /** After resuming, A's sidecar failed A's probe. */
  resumedFailsProbe: boolean;
}

const dec = new TextDecoder();

function holderOf(r: RecordedRequest): string | undefined {
  try {
    return JSON.parse(dec.decode(r.body)).holder;
  } catch {
    return undefined;
  }
}

function acquiredIn(r: RecordedRequest): boolean {
  try {
    return JSON.parse(r.answer ?? "").acquired === true;
  } catch {
    return false;
  }
}

function podEnv(
  pod: "a" | "b",
  lease: string,
  server: string,
  stateDir: string,
): Record<string, string> {
  return {
    BERTH_LEASE_NAME: lease,
    POD_NAMESPACE: "prod",
    POD_NAME: `web-${pod}`,
    POD_UID: `0000000${pod === "a" ? 1 : 2}-0c5b-4d7e-9a51-2f0f3c1d7e11`,
    BERTH_CLUSTER_ID: TEAM.keyId,
    BERTH_API_KEY: TEAM.token,
    BERTH_TTL_SECONDS: String(MIXED_TTL_SECONDS),
    BERTH_HEARTBEAT_SECONDS: "1",
    BERTH_STATE_DIR: stateDir,
    BERTH_API_SERVER: server,
  };
}

/**
 * Runs one combination.
 *
 * @param init The init container's helper.
 * @param sidecar The sidecar's helper.
 * @param real The upstream server.
 * @returns What it showed.
 */
export async function runMixedPod(
  init: HelperKind,
  sidecar: HelperKind,
  real: PeerServer,
): Promise<MixedOutcome> {
  await using proxy = await startRecordingProxy(real.url, real.target.caCert);
  await using dirA = await tempDir("berth-peer-mix-a-");
  await using dirB = await tempDir("berth-peer-mix-b-");
  const lease = `mix-${init}-${sidecar}`;
  const envA = podEnv("a", lease, proxy.url, dirA.path);
  const envB = podEnv("b", lease, proxy.url, dirB.path);

  const a = await runHelper(init, ["acquire"], envA);
  assert.equal(a.code, 0, `pod A's ${init} init failed:\n${a.stderr}`);
  const holderA = readStateFile(dirA.path, "holder")!;
  const tokenA = Number(readStateFile(dirA.path, "token"));

  await using side = new PeerProcess(sidecar, ["renew"], envA);
  const renew = await waitFor(
    () =>
      proxy.requests.find((r) =>
        r.path.endsWith("/renew") && holderOf(r) === holderA &&
        r.answer !== undefined
      ) ?? (side.exited ? "exited" : undefined),
    { timeoutMs: 30_000, what: `the ${sidecar} sidecar's first renew` },
  );
  if (renew === "exited") {
    throw new Error(`the ${sidecar} sidecar exited:\n${side.stderr}`);
  }
  const renewBody = dec.decode(renew.body);
  const adopted = JSON.parse(renewBody).fencingToken === tokenA &&
    acquiredIn(renew);

  const probeArgv = [
    `${dirA.path}/check`,
    "check",
    `${dirA.path}/healthy`,
    "--max-age",
    PROBE_MAX_AGE,
  ];
  const probe = async () => {
    const out = await new Deno.Command(probeArgv[0], {
      args: probeArgv.slice(1),
      stdout: "piped",
      stderr: "null",
      env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" },
      clearEnv: true,
    }).output();
    return { pass: out.code === 0, line: dec.decode(out.stdout).trim() };
  };
  assert.ok(
    (await probe()).pass,
    "A's probe must pass while A holds the lease",
  );

  side.kill("SIGSTOP");
  await using podB = new PeerProcess(init, ["acquire"], envB);
  const results: { start: number; end: number; pass: boolean; line: string }[] =
    [];
  let granted: RecordedRequest | undefined;
  let firstFail: { start: number; line: string } | undefined;
  const cap = Date.now() + 60_000;
  while (Date.now() < cap) {
    const start = Date.now();
    const r = await probe();
    results.push({ start, end: Date.now(), ...r });
    if (!r.pass && !firstFail) firstFail = { start, line: r.line };
    granted ??= proxy.requests.find((q) =>
      holderOf(q) !== holderA && q.path.endsWith("/acquire") && acquiredIn(q)
    );
    if (firstFail && granted) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(granted, `pod B never got the lease:\n${podB.stderr}`);
  assert.ok(firstFail, "A's probe kept passing for a minute");
  const grantedAt = granted.answeredAt!;
  const lastPass = results.filter((r) => r.pass && r.end > grantedAt).at(-1);

  side.kill("SIGCONT");
  let resumedFailsProbe = false;
  try {
    await waitFor(async () => !(await probe()).pass, {
      timeoutMs: 15_000,
      what: "A's probe to fail after its sidecar resumed",
    });
    resumedFailsProbe = true;
  } catch { /* reported */ }
  await podB.wait();

  return {
    init,
    sidecar,
    adopted,
    renewBody,
    overlapMs: firstFail.start - grantedAt,
    lastPassAfterMs: lastPass ? lastPass.end - grantedAt : undefined,
    failLine: firstFail.line,
    resumedFailsProbe,
  };
}

/**
 * Registers the mixed-pod test.
 *
 * @param ignore Skip it (the tier cannot run here).
 */
export function registerMixedPodsSuite(ignore: boolean): void {
  Deno.test({
    name: "peers: pods mixing the Go helper and this one hand the lease over",
    ignore,
    sanitizeOps: false,
    sanitizeResources: false,
    fn: async (t) => {
      await using dir = await tempDir("berth-peer-mixsrv-");
      await using real = await startRealServer(dir.path);
      const combos: [HelperKind, HelperKind][] = [
        ["go", "ours"],
        ["ours", "go"],
        ["go", "go"],
        ["ours", "ours"],
      ];
      const renewBodies: Partial<Record<HelperKind, string>> = {};
      for (const [init, sidecar] of combos) {
        await t.step(`${init} init + ${sidecar} sidecar`, async () => {
          const o = await runMixedPod(init, sidecar, real);
          if (init === sidecar) renewBodies[sidecar] = o.renewBody;
          console.log(
            `mixed pod: ${init} init + ${sidecar} sidecar: handoff ${
              o.adopted ? "adopted" : "NOT adopted"
            }, renew body ${o.renewBody}; frozen sidecar (TTL ${MIXED_TTL_SECONDS}s, probe --max-age ${PROBE_MAX_AGE}): A's probe first failed ${
              (o.overlapMs / 1000).toFixed(1)
            } s after B got the lease${
              o.lastPassAfterMs === undefined
                ? " (no pass after it)"
                : `, last passed ${
                  (o.lastPassAfterMs / 1000).toFixed(1)
                } s after`
            } ("${o.failLine}"); resumed sidecar ${
              o.resumedFailsProbe
                ? "failed the probe"
                : "did NOT fail the probe"
            }`,
          );
          assert.ok(
            o.adopted,
            `the ${sidecar} sidecar did not adopt the ${init} init's handoff`,
          );
          if (init === "ours" && sidecar === "ours") {
            assert.equal(
              o.lastPassAfterMs,
              undefined,
              "with both halves this project's, A's probe must fail before B gets the lease",
            );
          }
        });
      }
      await t.step("both sidecars send the same renew body", () => {
        assert.equal(
          renewBodies.ours,
          renewBodies.go,
          "the renew bodies of the same pod (holder, token 1, TTL) differ",
        );
      });
    },
  });
}
