/**
 * The resolved configuration of `acquire`, `renew` and `run`: env, then the
 * flags given, then defaults, then validation: Go's checks in its order and
 * words, then those it lacks, each turning a silent hang into an error at
 * start-up (docs/configuration.md). The first problem is reported.
 *
 * @module
 */
import { ConfigError, DEFAULT_STATE_DIR } from "./argv.ts";
import {
  holderIdentity,
  holderProblem,
  type HostFacts,
  hostHolderIdentity,
  leaseKeyProblem,
  type Mode,
  runtimeHolderProblem,
} from "./identity.ts";
import {
  type EnforceMode,
  ENFORCER_LEAD_DEFAULT,
  type LeadDefault,
  leadProblem,
  roomProblem,
} from "./lead.ts";
import {
  CONFIG_SETTINGS,
  type ConfigFlagName,
  type ConfigFlags,
  envOf,
  readSettings,
} from "./settings.ts";
import { type LogFormat, type LogLevel, Secret } from "../obs/log.ts";

export type { EnforceMode };

const MAX_TTL_SECONDS = 2147483647;

/** The validated configuration, as the settings table describes it. */
export interface Config {
  leaseName: string;
  leaseNamespace: string;
  mode: Mode;
  enforce: EnforceMode;
  signalTarget: string;
  ttlSeconds: number;
  heartbeatMs: number;
  enforceGraceSeconds: number;
  enforceLeadMs: number;
  releaseOnShutdown: boolean;
  holder: string;
  stateDir: string;
  apiServer: string;
  apiKey?: Secret;
  apiKeyFile?: string;
  caBundleFile?: string;
  serverName?: string;
  insecureSkipTlsVerify: boolean;
  acquireTimeoutMs?: number;
  logFormat: LogFormat;
  logLevel: LogLevel;
}

/** What differs between the roles: the lead and grace defaults, the host a holder comes from when no pod fact is given, what a role in runtime-singleton mode only says to another mode. */
export interface ResolveOptions {
  leadDefault?: LeadDefault;
  hostHolder?: HostFacts;
  singletonOnly?: string;
}

const where = (flag: ConfigFlagName) => `${envOf(flag)} or --${flag}`;

/**
 * The validated configuration from the environment and the flags given.
 * @throws {ConfigError} The first problem found.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const env = { BERTH_LEASE_NAME: "web", BERTH_LEASE_NAMESPACE: "prod", BERTH_HOLDER_IDENTITY: "h" };
 * const config = resolveConfig({ ...env, BERTH_API_SERVER: "http://h:80" }, { "ttl-seconds": "30" });
 * assert.equal(config.heartbeatMs, 10_000); // TTL/3
 * assert.throws(() => resolveConfig({}, {}), /lease name is required/);
 * ```
 */
export function resolveConfig(
  env: Record<string, string | undefined>,
  flags: ConfigFlags,
  options: ResolveOptions = {},
): Config {
  const leadDefault = options.leadDefault ?? ENFORCER_LEAD_DEFAULT;
  const given = readSettings(env, flags);
  const get = <T>(flag: ConfigFlagName) =>
    given.get(flag)?.value as T | undefined;
  const str = (flag: ConfigFlagName) => get<string>(flag) ?? "";

  const podNamespace = str("pod-namespace");
  const leaseName = str("lease-name");
  const leaseNamespace = get<string>("lease-namespace") ?? podNamespace;
  const mode = get<Mode>("mode") ?? "runtime-singleton";
  const enforce = get<EnforceMode>("enforce") ?? "probe";
  const signalTarget = str("signal-target");
  const ttlSeconds = get<number>("ttl-seconds");
  // 0 or less is unset (TTL/3): the Go helper's defaults run before its checks.
  const heartbeatGiven = get<number>("heartbeat-seconds") ?? 0;
  const heartbeatSeconds = heartbeatGiven > 0 ? heartbeatGiven : undefined;
  const leadSeconds = get<number>("enforce-lead-seconds");
  const apiServer = str("api-server");
  const apiKey = str("api-key");
  const apiKeyFile = str("api-key-file");
  const stateDir = get<string>("state-dir") ?? DEFAULT_STATE_DIR;
  const holderInput = {
    mode,
    explicit: str("holder-identity"),
    clusterId: str("cluster-id"),
    podNamespace,
    workloadKind: str("workload-kind"),
    workloadName: str("workload-name"),
    podName: str("pod-name"),
    podUid: str("pod-uid"),
  };
  const onHost = options.hostHolder !== undefined &&
    mode === "runtime-singleton" && !holderInput.explicit &&
    !holderInput.podUid && !holderInput.podName && !podNamespace;

  const ttl = ttlSeconds ?? 0;
  const grace = get<number>("enforce-grace-seconds") ??
    leadDefault.grace?.seconds({ ttl, heartbeatSeconds, leadSeconds }) ?? 0;
  const lead = leadSeconds ?? leadDefault.seconds(enforce, grace);
  const holder = onHost
    ? hostHolderIdentity(holderInput.clusterId, options.hostHolder!)
    : holderIdentity(holderInput);
  const key = leaseKeyProblem(leaseNamespace, leaseName);
  const singleton = mode === "runtime-singleton";
  const as = (flag: ConfigFlagName) => given.get(flag)?.source;
  // 1-11: Go's list, in its order; then the checks Go lacks.
  const problem = (mode === "startup-gate" && options.singletonOnly) ||
    (leaseName === "" &&
      `lease name is required (set ${where("lease-name")})`) ||
    (leaseNamespace === "" &&
      "lease namespace is required (set --lease-namespace or POD_NAMESPACE), or set BERTH_LEASE_NAMESPACE") ||
    (mode !== "startup-gate" && !singleton &&
      `invalid mode ${
        JSON.stringify(mode)
      } (want "startup-gate" or "runtime-singleton")`) ||
    (enforce !== "probe" && enforce !== "signal" &&
      `invalid enforce ${
        JSON.stringify(enforce)
      } (want "probe" or "signal")`) ||
    (singleton && enforce === "signal" && !signalTarget &&
      'enforce "signal" in runtime-singleton mode needs BERTH_SIGNAL_TARGET (or --signal-target): ' +
        "an empty target would signal every process in the shared PID namespace, " +
        "including co-located sidecars; set it to the workload's process name (comm) " +
        "or executable basename, e.g. nginx") ||
    (!onHost && runtimeHolderProblem(holderInput)) ||
    ((ttl < 1 || ttl > MAX_TTL_SECONDS) &&
      `ttl must be positive and at most ${MAX_TTL_SECONDS} seconds (the API limit)` +
        (ttlSeconds === undefined
          ? `; set ${where("ttl-seconds")}`
          : `: ${as("ttl-seconds")}=${ttl}`)) ||
    (heartbeatSeconds !== undefined && heartbeatSeconds >= ttl &&
      `heartbeat must be less than the ttl (heartbeat ${heartbeatSeconds}s, ttl ${ttl}s; ` +
        "set BERTH_HEARTBEAT_SECONDS below BERTH_TTL_SECONDS, or leave it unset for ttl/3)") ||
    (grace < 0 && "enforce grace must not be negative") ||
    (!apiServer && `api server URL is required (set ${where("api-server")})`) ||
    (apiKey !== "" && apiKeyFile !== "" &&
      `api key and api key file are mutually exclusive: ${as("api-key")} and ${
        as("api-key-file")
      } are both set; set only one`) ||
    (key &&
      `${key.message}; ${
        key.part === "namespace"
          ? `set ${
            where("lease-namespace")
          } (default: POD_NAMESPACE) to a valid namespace`
          : key.part === "name"
          ? `set ${where("lease-name")} to a valid name`
          : "shorten the lease name or namespace"
      }`) ||
    holderProblem(holder) ||
    (stateDir === "" &&
      `state directory must not be empty (set ${
        where("state-dir")
      }, default ${DEFAULT_STATE_DIR})`) ||
    apiServerProblem(apiServer) ||
    (lead < 0 && "enforce lead must not be negative") ||
    (singleton && leadSeconds !== undefined && leadDefault.signals(enforce) &&
      leadProblem(as("enforce-lead-seconds")!, lead, grace)) ||
    (singleton && roomProblem(
      { ttl, heartbeatSeconds, lead, grace, leadSeconds, enforce },
      leadDefault,
    ));
  if (problem) throw new ConfigError(problem);

  const optional = (o: Partial<Config>) =>
    Object.fromEntries(Object.entries(o).filter(([, v]) => v));
  return {
    leaseName,
    leaseNamespace,
    mode,
    enforce,
    signalTarget,
    ttlSeconds: ttl,
    heartbeatMs: heartbeatSeconds === undefined
      ? ttl * 1000 / 3
      : heartbeatSeconds * 1000,
    enforceGraceSeconds: grace,
    enforceLeadMs: lead * 1000,
    releaseOnShutdown: get<boolean>("release-on-shutdown") ?? singleton,
    holder,
    stateDir,
    apiServer,
    ...optional({
      apiKey: apiKey ? new Secret(apiKey) : undefined,
      apiKeyFile,
      caBundleFile: str("ca-bundle-file"),
      serverName: str("server-name"),
      acquireTimeoutMs: get<number>("acquire-timeout"),
    }),
    insecureSkipTlsVerify: get<boolean>("insecure-skip-tls-verify") ?? false,
    logFormat: get<LogFormat>("log-format") ?? "text",
    logLevel: get<LogLevel>("log-level") ?? "INFO",
  };
}

/**
 * The settings given as {@linkcode resolveConfig} counts them: an empty variable is not given, an empty flag is.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const given = givenSettings({ BERTH_TTL_SECONDS: "30", BERTH_MODE: "" }, { "state-dir": "" });
 * assert.deepEqual([...given], ["ttl-seconds", "state-dir"]);
 * ```
 */
export function givenSettings(
  env: Record<string, string | undefined>,
  flags: ConfigFlags,
): Set<ConfigFlagName> {
  return new Set(
    CONFIG_SETTINGS.filter((s) => env[s.env] || flags[s.flag] !== undefined)
      .map((s) => s.flag),
  );
}

/**
 * Every required setting not given, in the validation order, for one message (a host holder needs no `POD_UID`).
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const missing = missingSettings({ BERTH_LEASE_NAME: "db" }, {}, {}).map((m) => m.env);
 * assert.deepEqual(missing, ["BERTH_LEASE_NAMESPACE", "POD_UID", "BERTH_TTL_SECONDS", "BERTH_API_SERVER"]);
 * ```
 */
export function missingSettings(
  env: Record<string, string | undefined>,
  flags: ConfigFlags,
  options: ResolveOptions = {},
): { env: string; flag: string; or?: string }[] {
  const given = givenSettings(env, flags);
  const out: ReturnType<typeof missingSettings> = [];
  const need = (flag: ConfigFlagName, or?: string) => {
    if (!given.has(flag)) {
      out.push({ env: envOf(flag), flag, ...(or ? { or } : {}) });
    }
  };
  need("lease-name");
  if (!given.has("pod-namespace")) need("lease-namespace", "POD_NAMESPACE");
  const mode = flags.mode ?? (env.BERTH_MODE || "runtime-singleton");
  const podFacts = given.has("pod-name") || given.has("pod-namespace");
  if (
    mode === "runtime-singleton" && !given.has("holder-identity") &&
    (options.hostHolder === undefined || podFacts)
  ) {
    need("pod-uid", "BERTH_HOLDER_IDENTITY");
  }
  need("ttl-seconds");
  need("api-server");
  return out;
}

/**
 * `url` with any user information replaced by `***`; in text that does not
 * parse as a URL, all up to the last `@`: over-redacting a malformed URL is
 * safe, leaking a password is not.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(redactUrl("https://u:SECRET@berth.example/x"), "https://***@berth.example/x");
 * ```
 */
export function redactUrl(url: string): string {
  const at = url.lastIndexOf("@");
  if (at < 0) return url;
  const scheme = url.indexOf("://");
  const from = scheme >= 0 && scheme < at ? scheme + 3 : 0;
  let cut = at;
  if (URL.canParse(url)) {
    // The user information ends at the authority's last "@", as URL splits it.
    cut = url.slice(from).split(/[/?#\\]/, 1)[0].lastIndexOf("@");
    if (cut < 0) return url;
    cut += from;
  }
  return `${url.slice(0, from)}***${url.slice(cut)}`;
}

/** The API server URL's problem, quoted redacted: http(s), a host, no credentials, query or fragment, no empty path segment (it prefixes the API's). */
export function apiServerProblem(url: string): string | undefined {
  const shown = JSON.stringify(redactUrl(url));
  const hint =
    "set BERTH_API_SERVER or --api-server to e.g. https://berth.example:8443";
  const u = URL.canParse(url) ? new URL(url) : undefined;
  if (
    u === undefined || (u.protocol !== "http:" && u.protocol !== "https:") ||
    u.host === ""
  ) {
    return `api server URL ${shown} is not an http:// or https:// URL (${hint})`;
  }
  if (u.username !== "" || u.password !== "") {
    return `api server URL ${shown} must not carry credentials: put the API key in a file and set BERTH_API_KEY_FILE or --api-key-file`;
  }
  if (u.search !== "" || u.hash !== "") {
    return `api server URL ${shown} must not have a query or fragment (${hint})`;
  }
  if (u.pathname.replace(/\/+$/, "").includes("//")) {
    return `api server URL ${shown} has an empty path segment (${hint})`;
  }
  return undefined;
}
