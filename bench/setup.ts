/**
 * The lease servers and the helper's environment the benchmarks share: a
 * development server over plain HTTP or over HTTPS with a private CA (its
 * certificate names `127.0.0.1` and `berth.test`, so the same server serves
 * the CA-bundle path and the server-name override path), and the
 * environment a helper process gets for each transport.
 *
 * @module
 */
import { type DevServer, startDevServer } from "../lib/devserver/server.ts";
import { baseEnv } from "../sim/cli.ts";
import { makeTestPki, type TestPki } from "../tests/support/tls.ts";

/** How the helper reaches the lease server. */
export type Transport = "http" | "https-ca" | "https-ca-sni";

/** Every transport, in report order. */
export const TRANSPORTS: readonly Transport[] = [
  "http",
  "https-ca",
  "https-ca-sni",
];

/** How each transport is named in the report. */
export const TRANSPORT_LABEL: Record<Transport, string> = {
  http: "HTTP",
  "https-ca": "HTTPS, CA bundle",
  "https-ca-sni": "HTTPS, CA bundle, server-name override",
};

/** The name the server-name override path verifies (the URL says `127.0.0.1`). */
export const SERVER_NAME = "berth.test";

/** The TTL every benchmark lease gets; long enough for heartbeat 10 s and the default lead. */
export const TTL_SECONDS = 30;

/** The private PKI and the servers are made once per run; dispose to remove them. */
export class Servers implements AsyncDisposable {
  private constructor(
    readonly pki: TestPki,
    private readonly all: DevServer[],
  ) {}

  /** Makes the PKI. Throws when openssl is missing (the HTTPS figures need it). */
  static async create(): Promise<Servers> {
    const pki = await makeTestPki({ names: ["127.0.0.1", SERVER_NAME] });
    return new Servers(pki, []);
  }

  /**
   * Starts a fresh server for `transport`, so that its request counts are
   * one client's alone.
   *
   * @param transport plain HTTP or HTTPS with the private CA's certificate
   * @returns the running server (closed with the others on dispose)
   */
  async start(transport: Transport): Promise<DevServer> {
    const server = await startDevServer(
      transport === "http" ? {} : {
        tls: { certFile: this.pki.serverCert, keyFile: this.pki.serverKey },
      },
    );
    this.all.push(server);
    return server;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await Promise.all(this.all.map((s) => s.close()));
    await this.pki.cleanup();
  }
}

/** What {@linkcode helperEnv} needs to know about one helper process. */
export interface HelperEnvOptions {
  /** The server it talks to. */
  server: DevServer;
  /** How it talks to it. */
  transport: Transport;
  /** The CA certificate for the HTTPS transports. */
  caFile: string;
  /** The lease's name, unique per helper so no two contend. */
  lease: string;
  /** The state volume. */
  stateDir: string;
  /** `BERTH_HEARTBEAT_SECONDS`, when not the default (TTL/3). */
  heartbeatSeconds?: number;
}

/** The whole environment of a helper (`acquire` or `renew`) for one transport. */
export function helperEnv(o: HelperEnvOptions): Record<string, string> {
  const env: Record<string, string> = {
    ...baseEnv(),
    BERTH_LEASE_NAME: o.lease,
    BERTH_TTL_SECONDS: String(TTL_SECONDS),
    BERTH_STATE_DIR: o.stateDir,
    BERTH_API_SERVER: o.server.url,
    POD_NAMESPACE: "bench",
    POD_NAME: o.lease,
    POD_UID: crypto.randomUUID(),
  };
  if (o.heartbeatSeconds !== undefined) {
    env.BERTH_HEARTBEAT_SECONDS = String(o.heartbeatSeconds);
  }
  if (o.transport !== "http") env.BERTH_CA_BUNDLE_FILE = o.caFile;
  if (o.transport === "https-ca-sni") env.BERTH_SERVER_NAME = SERVER_NAME;
  return env;
}

let leaseSerial = 0;

/**
 * A lease name no other benchmark process uses (`PREFIX-N`) and its empty
 * state volume under `dir`.
 *
 * @param dir The run's temporary directory.
 * @param prefix What the lease is for, e.g. `sidecar`.
 * @returns The lease's name and its state volume.
 */
export async function freshLease(
  dir: string,
  prefix: string,
): Promise<{ lease: string; stateDir: string }> {
  const lease = `${prefix}-${++leaseSerial}`;
  const stateDir = `${dir}/${lease}`;
  await Deno.mkdir(stateDir);
  return { lease, stateDir };
}

/**
 * Starts a long-running benchmark process with only `env` and no standard
 * streams (nothing reads its output).
 *
 * @param argv The program and its arguments.
 * @param env Its whole environment.
 * @returns The running process.
 */
export function spawnQuiet(
  argv: string[],
  env: Record<string, string>,
): Deno.ChildProcess {
  return new Deno.Command(argv[0], {
    args: argv.slice(1),
    env,
    clearEnv: true,
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
}
