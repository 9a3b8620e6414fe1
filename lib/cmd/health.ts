/**
 * The HTTP listener of `renew --health-addr` (and `run --health-addr`):
 * `GET /healthz` answers the probe's verdict from the renewer's own state,
 * for an `httpGet` liveness probe where the main image cannot run the copied
 * `check`; `GET /metrics` the Prometheus metrics.
 *
 * @module
 */
import { ConfigError } from "../config/argv.ts";
import type { RenewerStatus } from "../hold/lease.ts";
import {
  type HostPort,
  HostPortError,
  ListenError,
  listenerUrl,
  parseHostPort,
} from "../net/addr.ts";
import type { Logger } from "../obs/log.ts";
import { METRICS_CONTENT_TYPE } from "../obs/prometheus.ts";
import type { Clock } from "../state/clock.ts";
import { shownMs, type Verdict } from "../state/marker.ts";

/** The variable that sets the listener's address when `--health-addr` is not given. */
export const HEALTH_ADDR_ENV = "BERTH_HEALTH_ADDR";

/** Where the listener binds. */
export type HealthAddr = HostPort;

/**
 * The listener's address (`HOST:PORT`, `[V6]:PORT` or `:PORT`, as every
 * listen address of the CLI) from `--health-addr` when given (empty: off),
 * else from `BERTH_HEALTH_ADDR` (unset or empty: off).
 *
 * @throws {ConfigError} For a malformed value, saying what an `httpGet` probe needs.
 */
export function healthAddrFrom(
  flag: string | boolean | undefined,
  env: string | undefined,
): HealthAddr | undefined {
  const [value, source] = typeof flag === "string"
    ? [flag, "--health-addr"]
    : [env ?? "", HEALTH_ADDR_ENV];
  if (value === "") return undefined;
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
 * The probe's verdict from the renewer's state at monotonic time `now`, as
 * `check` would judge the marker the same renewer keeps: a closed permission
 * is `Absent` (the renewer stopped the workload itself), an open one past its
 * closing time `Stale` (the renewer did not act on time: an incident), else
 * `OK`. The endpoint is unauthenticated, so the reason line is the renewer's
 * own words, never text a server sent.
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

/** What `/healthz` and `/metrics` answer from: the renewer's state, the clock of its deadlines, the metrics (without them `/metrics` is 404). */
export interface HealthHandlerOptions {
  status: () => RenewerStatus;
  clock: Pick<Clock, "now">;
  metrics?: () => string;
}

/**
 * The request handler, apart from the socket: `GET`/`HEAD /healthz` answers
 * `200 ok` or `503 <reason line>`, `/metrics` the exposition; other paths
 * 404, other methods 405.
 */
export function healthHandler(
  o: HealthHandlerOptions,
): (req: Request) => Response {
  const text = (
    status: number,
    body: string | null,
    headers: Record<string, string> = {},
  ) =>
    new Response(body, {
      status,
      headers: {
        "content-type": "text/plain; charset=utf-8",
        "cache-control": "no-store",
        ...headers,
      },
    });
  return (req) => {
    const path = new URL(req.url).pathname;
    if (path !== "/healthz" && !(path === "/metrics" && o.metrics)) {
      return text(404, "404 page not found\n");
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      return text(405, "Method Not Allowed\n", { allow: "GET, HEAD" });
    }
    const body = (b: string) => req.method === "HEAD" ? null : b;
    if (path === "/metrics") {
      return text(200, body(o.metrics!()), {
        "content-type": METRICS_CONTENT_TYPE,
      });
    }
    const verdict = healthVerdict(o.status(), o.clock.now());
    return verdict.kind === "OK"
      ? text(200, body("ok\n"))
      : text(503, body(`${verdict.reason}\n`));
  };
}

/**
 * Starts the listener and logs its URL; returns how to close it (in-flight
 * requests finish). An address that cannot be bound fails the start-up,
 * naming it, rather than running without the probe it was asked for.
 */
export function startHealthServer(
  o: HealthHandlerOptions & HealthAddr & { logger: Logger },
): { close(): Promise<void> } {
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
  o.logger.info("serving /healthz and /metrics", {
    url: listenerUrl(server.addr, "http"),
  });
  let closed: Promise<void> | undefined;
  return { close: () => closed ??= server.shutdown() };
}
