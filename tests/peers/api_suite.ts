/**
 * Part (a) of the peer tier: every sequence of the corpus goes to the
 * upstream API server and to the development server, call by call, and the
 * answers must agree (status, the headers that matter, the body modulo times
 * and random ids). A sequence marked `allowed` may differ: it is reported.
 *
 * @module
 */
import { type Call, CORPUS, type Pause, type Sequence } from "./corpus.ts";
import { differences, normalize } from "./compare.ts";
import {
  backdate,
  type PeerServer,
  sqlite3Runs,
  startDevServer,
  startDevServerWithClock,
  startRealServer,
  TEAM,
  waitSwept,
} from "./peers.ts";
import { type RawRequest, rawRequest } from "./raw_http.ts";
import { tempDir } from "../support/lease_env.ts";
import { waitFor } from "../support/wait.ts";

/** What one sequence showed. */
export interface SequenceOutcome {
  /** The sequence. */
  sequence: Sequence;
  /** Per differing call: its index and the differences. */
  diffs: { call: number; lines: string[] }[];
  /** Why it was not run, if it was not. */
  skipped?: string;
}

/** The per-server state of a running sequence. */
interface Side {
  server: PeerServer;
  token: number;
  sentAt: number[];
}

/**
 * How far a cleaned-up sequence moves both servers past its lease's expiry:
 * the real server's row is backdated by it, the development server's clock
 * moved forward by it. Over the 5 minutes after which the sweep cleans up.
 */
const CLEANUP_BACKDATE_S = 400;

const isPause = (s: Call | Pause): s is Pause =>
  "expire" in s || "cleanup" in s;

function toRequest(call: Call, lease: string, token: number): RawRequest {
  const path = (call.path ??
    `/v1alpha1/namespaces/prod/leases/{{lease}}/${call.op}`).replaceAll(
      "{{lease}}",
      lease,
    );
  let body = typeof call.body === "object"
    ? JSON.stringify(call.body)
    : call.body;
  body = body?.replaceAll("{{t+1}}", String(token + 1)).replaceAll(
    "{{t}}",
    String(token),
  );
  const auth = call.auth === undefined ? `Bearer ${TEAM.token}` : call.auth;
  const extra = call.headers ?? [];
  const headers: [string, string][] = [];
  if (auth !== null) headers.push(["Authorization", auth]);
  if (!extra.some(([k]) => k.toLowerCase() === "content-type")) {
    headers.push(["Content-Type", "application/json"]);
  }
  headers.push(...extra);
  return {
    method: call.method ?? "POST",
    path,
    headers,
    body,
    noHost: call.noHost,
  };
}

async function pause(
  p: Pause,
  sides: Side[],
  lease: string,
): Promise<void> {
  const lastSent = Math.max(...sides.flatMap((s) => s.sentAt));
  // Expiry is strictly after renewedAt + TTL (1 s in these sequences).
  const expired = () => Date.now() > lastSent + 1_250;
  await waitFor(expired, { timeoutMs: 10_000, what: "the 1 s TTL to pass" });
  if ("cleanup" in p) {
    const real = sides.find((s) => s.server.kind === "real")!;
    const dev = sides.find((s) => s.server.kind === "dev")!;
    const key = { namespace: "prod", name: lease };
    await backdate(real.server.dbPath!, key, CLEANUP_BACKDATE_S);
    await waitSwept(real.server.dbPath!, [key]);
    if (!dev.server.advanceAndSweep) {
      throw new Error(
        "a cleaned-up sequence needs the development server started with a clock (startDevServerWithClock)",
      );
    }
    const cleaned = dev.server.advanceAndSweep(CLEANUP_BACKDATE_S * 1000);
    if (cleaned !== 1) {
      throw new Error(
        `the development server's sweep cleaned up ${cleaned} records after its clock moved ${CLEANUP_BACKDATE_S} s, not the sequence's one lease`,
      );
    }
  }
}

/**
 * Runs one sequence against both servers, call by call (each call to both at
 * once, so a TTL pause is waited once).
 *
 * @param seq The sequence.
 * @param lease Its lease name.
 * @param real The upstream server.
 * @param dev The development server.
 * @returns The differences per call.
 */
export async function runSequence(
  seq: Sequence,
  lease: string,
  real: PeerServer,
  dev: PeerServer,
): Promise<SequenceOutcome> {
  const sides: Side[] = [real, dev].map((server) => ({
    server,
    token: 0,
    sentAt: [],
  }));
  const out: SequenceOutcome = { sequence: seq, diffs: [] };
  let callIndex = 0;
  for (const step of seq.steps) {
    if (isPause(step)) {
      await pause(step, sides, lease);
      continue;
    }
    const answers = await Promise.all(sides.map(async (side) => {
      const req = toRequest(step, lease, side.token);
      side.sentAt.push(Date.now());
      const res = await rawRequest(side.server.target, req);
      if (step.op === "acquire" && res.status === 200) {
        try {
          const b = JSON.parse(res.body);
          if (b.acquired === true) side.token = b.fencingToken;
        } catch { /* compared below */ }
      }
      return normalize(res, req, seq.ignoreHeaders);
    }));
    const lines = differences(answers[0], answers[1]);
    if (lines.length > 0) out.diffs.push({ call: callIndex, lines });
    callIndex++;
  }
  return out;
}

async function pool<T, R>(
  items: readonly T[],
  size: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: size }, async () => {
      while (next < items.length) {
        const i = next++;
        results[i] = await fn(items[i], i);
      }
    }),
  );
  return results;
}

/**
 * Registers the corpus test.
 *
 * @param ignore Skip it (the tier cannot run here).
 */
export function registerApiSuite(ignore: boolean): void {
  Deno.test({
    name:
      "peers: the development server answers the request corpus like the upstream API server",
    ignore,
    sanitizeOps: false,
    sanitizeResources: false,
    fn: async (t) => {
      await using dir = await tempDir("berth-peer-api-");
      await using real = await startRealServer(dir.path);
      await using dev = await startDevServer();
      const canClean = sqlite3Runs();
      const outcomes = await pool(CORPUS, 8, (seq, i) => {
        if (seq.group === "cleaned up" && !canClean) {
          return Promise.resolve({
            sequence: seq,
            diffs: [],
            skipped: "sqlite3 is not installed",
          });
        }
        if (seq.steps.some((s) => "cleanup" in s)) {
          return (async () => {
            // Its own server: moving the clock must not expire other
            // sequences' leases.
            await using clocked = await startDevServerWithClock();
            return await runSequence(seq, `s${i}`, real, clocked);
          })();
        }
        return runSequence(seq, `s${i}`, real, dev);
      });
      let same = 0, differ = 0, allowed = 0, skipped = 0;
      for (const o of outcomes) {
        const seq = o.sequence;
        await t.step({
          name: `${seq.group}: ${seq.name}`,
          ignore: o.skipped !== undefined,
          fn: () => {
            if (o.diffs.length === 0) return;
            const text = o.diffs.map((d) =>
              `call ${d.call + 1}: ${d.lines.join("; ")}`
            ).join("\n");
            if (seq.allowed) {
              console.log(`allowed difference (${seq.allowed}):\n${text}`);
              return;
            }
            throw new Error(`the servers differ:\n${text}`);
          },
        });
        if (o.skipped) skipped++;
        else if (o.diffs.length === 0) same++;
        else if (seq.allowed) allowed++;
        else differ++;
      }
      console.log(
        `peer corpus: ${CORPUS.length} sequences: ${same} same, ${differ} differ, ${allowed} allowed differences, ${skipped} not run`,
      );
    },
  });
}
