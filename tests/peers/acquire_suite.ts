/**
 * Part (b) of the peer tier: configurations run through both helpers'
 * `acquire`, each helper behind its own recording proxy in front of the
 * upstream API server, and the first request each sends is compared byte for
 * byte (method, path, body) with the headers that matter (`content-type`,
 * `authorization`). A configuration both helpers refuse sends nothing from
 * either; then the exit codes are compared.
 *
 * @module
 */
import { type HelperKind, PeerProcess } from "./helpers.ts";
import { type PeerServer, startRealServer, TEAM } from "./peers.ts";
import {
  type RecordedRequest,
  startRecordingProxy,
} from "./recording_proxy.ts";
import { tempDir } from "../support/lease_env.ts";
import { waitFor } from "../support/wait.ts";

/** One configuration: environment on top of a base, and arguments. */
export interface AcquireConfig {
  /** What varies, the test step's name. */
  name: string;
  /** Variables set on top of {@linkcode BASE_ENV}; `null` removes one. */
  env?: Record<string, string | null>;
  /** Arguments after `acquire`. */
  args?: string[];
  /** A documented difference this configuration may show. */
  allowed?: string;
  /**
   * With `allowed`: what this helper must do instead, refuse the
   * configuration: exit 1 without sending a request, with an error matching
   * this (in the log line, where quotes are escaped). Checked whether or not
   * the helpers differ.
   */
  oursRefuses?: RegExp;
}

/** A pod of the default shape: runtime-singleton, tenant root `team`. */
export const BASE_ENV: Record<string, string> = {
  BERTH_LEASE_NAME: "web",
  POD_NAMESPACE: "prod",
  POD_NAME: "web-0",
  POD_UID: "8c21b044-0c5b-4d7e-9a51-2f0f3c1d7e11",
  BERTH_CLUSTER_ID: "team",
  BERTH_TTL_SECONDS: "30",
  BERTH_API_KEY: TEAM.token,
};

const RUNTIME_TTL =
  "this helper needs heartbeat + enforcement lead < TTL in runtime-singleton mode (docs/compatibility.md, Upgrading from the Go helper: New validation)";
const KEY_CHECK =
  "this helper validates the lease key at start-up instead of retrying against the server's 400";

const HOLDER_LIMIT =
  "this helper refuses a holder over the API's 253-byte limit at start-up, where the Go helper retries against the server's 400 for ever";

const GO_INTEGERS =
  "this helper refuses an integer flag the Go helper reads as Go source does (docs/compatibility.md, Differences: integer flags are plain decimal)";

const EMPTY_FLAG =
  "an explicitly empty flag value overrides the environment and then fails validation (helper contract, Configuration; docs/compatibility.md, Differences); the Go helper falls back to POD_NAMESPACE";

const holder = (
  h: string,
  more: Partial<AcquireConfig> = {},
): AcquireConfig => ({
  name: `explicit holder ${JSON.stringify(h)}`,
  env: { BERTH_HOLDER_IDENTITY: h },
  ...more,
});
const gate = (
  env: Record<string, string | null>,
  name: string,
): AcquireConfig => ({
  name: `startup-gate, ${name}`,
  env: { BERTH_MODE: "startup-gate", ...env },
});

/** Every configuration. */
export const CONFIGS: readonly AcquireConfig[] = [
  { name: "runtime-singleton defaults" },
  { name: "startup-gate defaults", env: { BERTH_MODE: "startup-gate" } },
  gate(
    { BERTH_WORKLOAD_KIND: "Deployment", BERTH_WORKLOAD_NAME: "web" },
    "a workload",
  ),
  gate({ BERTH_WORKLOAD_KIND: "StatefulSet" }, "a workload kind only"),
  gate({ BERTH_WORKLOAD_NAME: "web" }, "a workload name only"),
  gate({ BERTH_CLUSTER_ID: null }, "no cluster id"),
  gate(
    { BERTH_CLUSTER_ID: null, POD_NAME: null },
    "no cluster id nor pod name",
  ),
  gate({ BERTH_TTL_SECONDS: "1" }, "TTL 1"),
  gate({ BERTH_TTL_SECONDS: "2" }, "TTL 2"),
  gate({ BERTH_TTL_SECONDS: "2147483647" }, "the largest TTL"),
  gate({ BERTH_TTL_SECONDS: "+30" }, "TTL +30"),
  gate({ BERTH_TTL_SECONDS: "030" }, "TTL 030 in the environment"),
  {
    name: "runtime-singleton with a workload",
    env: { BERTH_WORKLOAD_KIND: "ReplicaSet", BERTH_WORKLOAD_NAME: "web-7f6c" },
  },
  { name: "runtime-singleton without a pod name", env: { POD_NAME: null } },
  {
    name: "runtime-singleton without a cluster id",
    env: { BERTH_CLUSTER_ID: null },
  },
  { name: "cluster id east", env: { BERTH_CLUSTER_ID: "east" } },
  { name: "another namespace", env: { POD_NAMESPACE: "kube-system" } },
  {
    name: "a lease namespace apart from the pod's",
    env: { BERTH_LEASE_NAMESPACE: "shared" },
  },
  { name: "a lease name with dots", env: { BERTH_LEASE_NAME: "web.v1.db" } },
  {
    name: "a lease name with a slash",
    env: { BERTH_LEASE_NAME: "a/b" },
    allowed: KEY_CHECK,
  },
  {
    name: "a lease name with capitals",
    env: { BERTH_LEASE_NAME: "Web" },
    allowed: KEY_CHECK,
  },
  { name: "TTL 7", env: { BERTH_TTL_SECONDS: "7" } },
  { name: "TTL 3600", env: { BERTH_TTL_SECONDS: "3600" } },
  {
    name: "TTL 3 in runtime-singleton",
    env: { BERTH_TTL_SECONDS: "3" },
    allowed: RUNTIME_TTL,
  },
  { name: "TTL 0", env: { BERTH_TTL_SECONDS: "0" } },
  { name: "TTL -5", env: { BERTH_TTL_SECONDS: "-5" } },
  { name: "TTL 2147483648", env: { BERTH_TTL_SECONDS: "2147483648" } },
  { name: "TTL 30s", env: { BERTH_TTL_SECONDS: "30s" } },
  { name: "TTL 0x1e in the environment", env: { BERTH_TTL_SECONDS: "0x1e" } },
  { name: "no TTL", env: { BERTH_TTL_SECONDS: null } },
  { name: "heartbeat 0", env: { BERTH_HEARTBEAT_SECONDS: "0" } },
  { name: "heartbeat -1", env: { BERTH_HEARTBEAT_SECONDS: "-1" } },
  { name: "heartbeat 2", env: { BERTH_HEARTBEAT_SECONDS: "2" } },
  {
    name: "heartbeat equal to the TTL",
    env: { BERTH_HEARTBEAT_SECONDS: "30" },
  },
  { name: "--ttl-seconds=45", args: ["--ttl-seconds=45"] },
  {
    name: "--ttl-seconds=030",
    args: ["--ttl-seconds=030"],
    allowed: GO_INTEGERS,
    oursRefuses:
      /--ttl-seconds=\\?"030\\?": the Go helper reads [^;]*\(24, not 30\)/,
  },
  {
    name: "--ttl-seconds=0x1e",
    args: ["--ttl-seconds=0x1e"],
    allowed: GO_INTEGERS,
    oursRefuses: /--ttl-seconds=\\?"0x1e\\?": the Go helper reads it as 30 /,
  },
  {
    name: "--ttl-seconds=3_0",
    args: ["--ttl-seconds=3_0"],
    allowed: GO_INTEGERS,
    oursRefuses: /--ttl-seconds=\\?"3_0\\?": the Go helper reads it as 30 /,
  },
  { name: "--heartbeat-seconds=0", args: ["--heartbeat-seconds=0"] },
  {
    name: "--lease-name flag over the environment",
    args: ["--lease-name", "db"],
  },
  { name: "--lease-namespace flag", args: ["--lease-namespace=ops"] },
  {
    name: "an explicitly empty --lease-namespace",
    args: ["--lease-namespace="],
    allowed: EMPTY_FLAG,
    oursRefuses: /lease namespace is required/,
  },
  {
    name: "--holder-identity flag",
    args: ["--holder-identity", "team/flagged"],
  },
  { name: "--cluster-id flag", args: ["--cluster-id=west"] },
  { name: "--mode=startup-gate flag", args: ["--mode=startup-gate"] },
  {
    name: "--pod-uid flag",
    args: ["--pod-uid=11111111-2222-3333-4444-555555555555"],
  },
  { name: "a pod UID with a colon", env: { POD_UID: "a:b" } },
  { name: "no pod UID", env: { POD_UID: null } },
  { name: "an invalid mode", env: { BERTH_MODE: "leader" } },
  {
    name: "signal enforcement without a target",
    env: { BERTH_ENFORCE: "signal" },
  },
  {
    name: "signal enforcement with a target",
    env: { BERTH_ENFORCE: "signal", BERTH_SIGNAL_TARGET: "nginx" },
  },
  {
    name: "an invalid release-on-shutdown",
    env: { BERTH_RELEASE_ON_SHUTDOWN: "maybe" },
  },
  {
    name: "release-on-shutdown false",
    env: { BERTH_RELEASE_ON_SHUTDOWN: "false" },
  },
  { name: "no API key", env: { BERTH_API_KEY: null } },
  {
    name: "an API server URL with a trailing slash",
    env: { BERTH_API_SERVER: "{{server}}/" },
  },
  { name: "no lease name", env: { BERTH_LEASE_NAME: null } },
  holder("team/x"),
  holder("team"),
  holder("team/<a>&b"),
  holder("team/line\u2028sep\u2029para"),
  holder('team/"quoted"\\back'),
  holder("team/é☃😀"),
  holder(" team/padded "),
  holder("team/tab\there"),
  holder("team/ctl\u0001\u001f"),
  holder("team/" + "x".repeat(248)),
  holder("team/" + "x".repeat(249), { allowed: HOLDER_LIMIT }),
  holder("other/not-mine"),
  holder("team/<script>", {
    env: { BERTH_HOLDER_IDENTITY: "team/<script>", BERTH_MODE: "startup-gate" },
  }),
];

/** What one helper did with a configuration. */
interface Observed {
  request?: RecordedRequest;
  code?: number;
  stderr: string;
}

async function observe(
  kind: HelperKind,
  config: AcquireConfig,
  server: PeerServer,
): Promise<Observed> {
  await using proxy = await startRecordingProxy(
    server.url,
    server.target.caCert,
  );
  await using dir = await tempDir(`berth-peer-acq-${kind}-`);
  const env: Record<string, string> = {
    ...BASE_ENV,
    BERTH_API_SERVER: proxy.url,
    BERTH_STATE_DIR: `${dir.path}/state`,
  };
  for (const [k, v] of Object.entries(config.env ?? {})) {
    if (v === null) delete env[k];
    else env[k] = v.replaceAll("{{server}}", proxy.url);
  }
  await using p = new PeerProcess(kind, ["acquire", ...config.args ?? []], env);
  await waitFor(() => proxy.requests.length > 0 || p.exited !== undefined, {
    timeoutMs: 30_000,
    what: `the ${kind} helper's first request or its exit`,
  });
  if (proxy.requests.length === 0) await p.wait();
  return {
    request: proxy.requests[0],
    code: p.exited?.code,
    stderr: p.stderr,
  };
}

const dec = new TextDecoder();

function describe(r: RecordedRequest): string {
  return `${r.method} ${r.path} ${
    JSON.stringify(dec.decode(r.body))
  } content-type=${JSON.stringify(r.headers["content-type"])} authorization=${
    JSON.stringify(r.headers["authorization"])
  }`;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/**
 * What is wrong with this helper's refusal of a configuration it must refuse:
 * a request sent, an exit code other than 1, or an error not matching.
 *
 * @param ours What this helper did.
 * @param expected What its error must match.
 * @returns One line per fault; empty when it refused as expected.
 */
function refusalFaults(ours: Observed, expected: RegExp): string[] {
  const out: string[] = [];
  if (ours.request) out.push(`ours sent a request: ${describe(ours.request)}`);
  if (ours.code !== 1) out.push(`ours exited ${ours.code}, not 1`);
  if (!expected.test(ours.stderr)) {
    out.push(
      `ours did not say ${expected}: ${
        JSON.stringify(ours.stderr.trim().split("\n").at(-1))
      }`,
    );
  }
  return out;
}

/**
 * The differences between what the Go helper and this one did.
 *
 * @param go The Go helper's.
 * @param ours This helper's.
 * @returns One line per difference; empty when they agree.
 */
function compare(go: Observed, ours: Observed): string[] {
  if (!go.request || !ours.request) {
    if (!go.request && !ours.request) {
      return go.code === ours.code
        ? []
        : [`exit code: go ${go.code}, ours ${ours.code}`];
    }
    const sent = go.request ? "go" : "ours";
    const silent = go.request ? ours : go;
    return [
      `only ${sent} sent a request (${
        describe((go.request ?? ours.request)!)
      }); the other exited ${silent.code}: ${
        silent.stderr.trim().split("\n").at(-1)
      }`,
    ];
  }
  const out: string[] = [];
  const a = go.request, b = ours.request;
  if (
    a.method !== b.method || a.path !== b.path || !sameBytes(a.body, b.body)
  ) {
    out.push(`request: go ${describe(a)}; ours ${describe(b)}`);
  }
  for (const h of ["content-type", "authorization"]) {
    if (a.headers[h] !== b.headers[h]) {
      out.push(
        `header ${h}: go ${JSON.stringify(a.headers[h])}, ours ${
          JSON.stringify(b.headers[h])
        }`,
      );
    }
  }
  return out;
}

/**
 * Registers the configuration test.
 *
 * @param ignore Skip it (the tier cannot run here).
 */
export function registerAcquireSuite(ignore: boolean): void {
  Deno.test({
    name:
      "peers: both helpers' acquire send the same request for each configuration",
    ignore,
    sanitizeOps: false,
    sanitizeResources: false,
    fn: async (t) => {
      await using dir = await tempDir("berth-peer-acqsrv-");
      await using real = await startRealServer(dir.path);
      const results: { diffs: string[]; faults: string[] }[] = new Array(
        CONFIGS.length,
      );
      let next = 0;
      await Promise.all(Array.from({ length: 4 }, async () => {
        while (next < CONFIGS.length) {
          const i = next++;
          const [go, ours] = await Promise.all([
            observe("go", CONFIGS[i], real),
            observe("ours", CONFIGS[i], real),
          ]);
          const expected = CONFIGS[i].oursRefuses;
          results[i] = {
            diffs: compare(go, ours),
            faults: expected ? refusalFaults(ours, expected) : [],
          };
        }
      }));
      let same = 0, differ = 0, allowed = 0;
      for (const [i, config] of CONFIGS.entries()) {
        const { diffs, faults } = results[i];
        await t.step(config.name, () => {
          if (faults.length > 0) {
            throw new Error(
              `this helper did not refuse as documented:\n${faults.join("\n")}`,
            );
          }
          if (diffs.length === 0) return;
          if (config.allowed) {
            console.log(
              `allowed difference (${config.allowed}):\n${diffs.join("\n")}`,
            );
            return;
          }
          throw new Error(`the helpers differ:\n${diffs.join("\n")}`);
        });
        if (diffs.length === 0) same++;
        else if (config.allowed) allowed++;
        else differ++;
      }
      console.log(
        `peer configurations: ${CONFIGS.length} through acquire: ${same} same, ${differ} differ, ${allowed} allowed differences`,
      );
    },
  });
}
