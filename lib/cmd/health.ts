/**
 * The HTTP listener of `renew --health-addr` (and `run --health-addr`):
 * `GET /healthz` gives the probe's verdict computed from the renewer's own
 * state, for pods whose main image cannot run the copied `check` (no glibc:
 * distroless/static, scratch, Alpine) and so need an `httpGet` liveness
 * probe; `GET /metrics` serves the Prometheus metrics.
 *
 * @module
 */
import type { Clock } from "../state/clock.ts";
import { ConfigError } from "../config/argv.ts";
import {
  type HostPort,
  HostPortError,
  ListenError,
  listenerUrl,
  parseHostPort,
} from "../net/addr.ts";
import type { Logger } from "../obs/log.ts";
import { shownMs, type Verdict } from "../state/marker.ts";
import { METRICS_CONTENT_TYPE } from "../obs/prometheus.ts";
import type { RenewerStatus } from "../hold/lease.ts";

/** The env variable that sets the listener's address when `--health-addr` is not given. */
export const HEALTH_ADDR_ENV = "BERTH_HEALTH_ADDR";

/** Where the listener binds. */
export type HealthAddr = HostPort;

/**
 * Parses the listener's address (`HOST:PORT`, `[V6]:PORT` or `:PORT`, as
 * {@linkcode parseHostPort} reads every listen address of the CLI), as a
 * configuration error that says what a Kubernetes `httpGet` probe needs.
 *
 * @param value The address as given.
 * @param source Where it came from, for the message (`--health-addr`).
 * @returns The hostname and port.
 * @throws {ConfigError} For a malformed value.
 */
export function parseHealthAddr(value: string, source: string): HealthAddr {
  try {
    return parseHostPort(value, source);
  } catch (e) {
    if (!(e instanceof HostPortError)) throw e;
    throw new ConfigError(
      `${source}=${
        JSON.stringify(value)
      }: ${e.problem}; want HOST:PORT with a port 0-65535, e.g. 127.0.0.1:8471, or :8471 for all interfaces (what a Kubernetes httpGet probe needs)`,
    );
  }
}

/**
 * The listener's address from the `--health-addr` flag (when given, even
 * empty: empty turns the listener off) or else `BERTH_HEALTH_ADDR` (unset or
 * empty: off). Throws a {@linkcode ConfigError} for a malformed value.
 *
 * @param flag The flag's value, when given.
 * @param env The variable's value, when set.
 * @returns The address, or `undefined` when the listener is off.
 */
export function healthAddrFrom(
  flag: string | boolean | undefined,
  env: string | undefined,
): HealthAddr | undefined {
  if (typeof flag === "string") {
    return flag === "" ? undefined : parseHealthAddr(flag, "--health-addr");
  }
  if (env === undefined || env === "") return undefined;
  return parseHealthAddr(env, HEALTH_ADDR_ENV);
}

/**
 * The probe's verdict from the renewer's state at monotonic time `now`,
 * matching what `check` would say about the marker the same renewer keeps:
 * a closed permission is `Absent` (the renewer stopped the workload itself:
 * lease lost, not confirmed, not yet acquired), an open one past its closing
 * time is `Stale` (the renewer did not act on time: an incident), else `OK`.
 * The endpoint is unauthenticated, so the reason line is the renewer's own
 * words ({@linkcode RenewerStatus.reason}), never text a server sent.
 *
 * @param status The renewer's state.
 * @param now Monotonic ms, on the clock of `status`'s deadlines.
 * @returns The verdict `/healthz` answers with.
 */
export function healthVerdict(status: RenewerStatus, now: number): Verdict {
  if (!status.permissionOpen) {
    return {
      kind: "Absent",
      reason: `lease gate closed: ${status.reason ?? "the lease is not held"}`,
    };
  }
  if (status.permissionClosesAt === undefined) {
    return {
      kind: "Stale",
      reason:
        "lease stale: the gate is open without a confirmed deadline; the renewer is not working",
    };
  }
  const late = now - status.permissionClosesAt;
  if (late > 0) {
    return {
      kind: "Stale",
      reason: `lease stale: gate deadline passed ${
        shownMs(late)
      } ago; the renewer has not confirmed the lease and has not stopped the workload`,
    };
  }
  return { kind: "OK" };
}

/** Options for {@linkcode healthHandler} and {@linkcode startHealthServer}. */
export interface HealthHandlerOptions {
  /** The lease state now. */
  status: () => RenewerStatus;
  /** The clock the status's deadlines are on. */
  clock: Pick<Clock, "now">;
  /** The `/metrics` body; without it `/metrics` answers 404. */
  metrics?: () => string;
}

const TEXT = "text/plain; charset=utf-8";

function text(
  status: number,
  body: string,
  head: boolean,
  extra: Record<string, string> = {},
  type = TEXT,
): Response {
  return new Response(head ? null : body, {
    status,
    headers: { "content-type": type, "cache-control": "no-store", ...extra },
  });
}

/**
 * The request handler, apart from the socket so tests call it directly:
 * `GET`/`HEAD /healthz` answers `200 ok` or `503 <reason line>`; `GET`/`HEAD
 * /metrics` the exposition; other paths 404, other methods 405.
 *
 * @param o The status source, clock and metrics.
 * @returns A request handler for `Deno.serve`.
 */
export function healthHandler(
  o: HealthHandlerOptions,
): (req: Request) => Response {
  return (req) => {
    const path = new URL(req.url).pathname;
    if (path !== "/healthz" && !(path === "/metrics" && o.metrics)) {
      return text(404, "404 page not found\n", false);
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      return text(405, "Method Not Allowed\n", false, {
        allow: "GET, HEAD",
      });
    }
    const head = req.method === "HEAD";
    if (path === "/metrics") {
      return text(200, o.metrics!(), head, {}, METRICS_CONTENT_TYPE);
    }
    const verdict = healthVerdict(o.status(), o.clock.now());
    return verdict.kind === "OK"
      ? text(200, "ok\n", head)
      : text(503, `${verdict.reason}\n`, head);
  };
}

/** Options for {@linkcode startHealthServer}. */
export interface HealthServerOptions extends HealthHandlerOptions, HealthAddr {
  /** Where the listening address is logged. */
  logger: Logger;
}

/** A running listener. */
export interface HealthServer {
  /** Base URL, e.g. `http://127.0.0.1:8471`. */
  url: string;
  /** The port bound (useful with port 0). */
  port: number;
  /** Stops listening; in-flight requests finish. */
  close(): Promise<void>;
}

/**
 * Starts the listener. Throws when the address cannot be bound (in use, not
 * an address of this host), so the caller fails at start-up with the address
 * in the message rather than running without the probe it was asked for.
 *
 * @param o The address, status source, clock, metrics and logger.
 * @returns The running listener.
 * @throws {Error} When the address cannot be bound.
 */
export function startHealthServer(o: HealthServerOptions): HealthServer {
  let server: Deno.HttpServer<Deno.NetAddr>;
  try {
    server = Deno.serve({
      hostname: o.hostname,
      port: o.port,
      onListen: () => {},
    }, healthHandler(o));
  } catch (e) {
    throw new Error(
      `${
        new ListenError(o, e).message
      } for the health endpoint; choose another --health-addr / ${HEALTH_ADDR_ENV}`,
      { cause: e },
    );
  }
  const addr = server.addr;
  const url = listenerUrl(addr, "http");
  o.logger.info("serving /healthz and /metrics", { url });
  let closed: Promise<void> | undefined;
  return {
    url,
    port: addr.port,
    close: () => closed ??= server.shutdown(),
  };
}
