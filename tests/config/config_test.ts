import assert from "node:assert/strict";
import { ConfigError, UsageError } from "../../lib/config/argv.ts";
import {
  apiServerProblem,
  redactUrl,
  resolveConfig,
  type ResolveOptions,
} from "../../lib/config/config.ts";
import {
  CONFIG_SETTINGS,
  configFlagsHelp,
  parseCommandLine,
} from "../../lib/config/settings.ts";
import { SIGNAL_SENDER_LEAD_DEFAULT } from "../../lib/config/lead.ts";
import { Secret } from "../../lib/obs/log.ts";

type Env = Record<string, string | undefined>;

/** The configuration flags in `args`, resolved against `env`. */
function loadConfig(env: Env, args: string[], options?: ResolveOptions) {
  return resolveConfig(env, parseCommandLine(args).flags, options);
}

const UID = "8c21b044-5f0e-4a7b-9b61-3f1c2d4e5a6b";
const KEY =
  "kid-1:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

/** A minimal valid runtime-singleton environment, as the webhook writes it. */
const BASE: Env = {
  BERTH_LEASE_NAME: "checkout",
  BERTH_TTL_SECONDS: "30",
  BERTH_API_SERVER: "https://berth.example:8443",
  POD_NAMESPACE: "prod",
  POD_NAME: "checkout-7f6c-j4n8x",
  POD_UID: UID,
};

function env(over: Env = {}): Env {
  return { ...BASE, ...over };
}

/** The problem `fn` fails with (a command-line mistake's, or a configuration's); fails the test when it throws anything else. */
function problem(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof UsageError) return e.message;
    assert.ok(e instanceof ConfigError, `not a ConfigError: ${e}`);
    assert.equal(e.message, `invalid configuration: ${e.problem}`);
    return e.problem;
  }
  assert.fail("the configuration was accepted");
}

function includes(actual: string, part: string): void {
  assert.ok(
    actual.includes(part),
    `${JSON.stringify(actual)} lacks ${JSON.stringify(part)}`,
  );
}

Deno.test("config: defaults of a minimal runtime-singleton pod", () => {
  const c = loadConfig(env(), []);
  assert.deepEqual(JSON.parse(JSON.stringify(c)), {
    leaseName: "checkout",
    leaseNamespace: "prod",
    mode: "runtime-singleton",
    enforce: "probe",
    signalTarget: "",
    ttlSeconds: 30,
    heartbeatMs: 10000,
    enforceGraceSeconds: 0,
    enforceLeadMs: 4000,
    releaseOnShutdown: true,
    holder: `prod/pod:checkout-7f6c-j4n8x:uid:${UID}`,
    stateDir: "/berth",
    apiServer: "https://berth.example:8443",
    insecureSkipTlsVerify: false,
    logFormat: "text",
    logLevel: "INFO",
  });
  for (
    const k of [
      "apiKey",
      "apiKeyFile",
      "caBundleFile",
      "serverName",
      "acquireTimeoutMs",
    ]
  ) {
    assert.ok(!(k in c), `${k} is set`);
  }
});

Deno.test("config: startup-gate defaults: no release, workload holder, no UID needed", () => {
  const c = loadConfig(
    env({
      BERTH_MODE: "startup-gate",
      POD_UID: undefined,
      BERTH_WORKLOAD_KIND: "deployment",
      BERTH_WORKLOAD_NAME: "checkout",
    }),
    [],
  );
  assert.equal(c.mode, "startup-gate");
  assert.equal(c.releaseOnShutdown, false);
  assert.equal(c.holder, "prod/deployment:checkout");
});

Deno.test("config: every env variable and flag is read", () => {
  const full: Env = {
    BERTH_LEASE_NAME: "a",
    BERTH_LEASE_NAMESPACE: "ns-a",
    BERTH_MODE: "runtime-singleton",
    BERTH_ENFORCE: "signal",
    BERTH_SIGNAL_TARGET: "nginx",
    BERTH_TTL_SECONDS: "60",
    BERTH_HEARTBEAT_SECONDS: "7",
    BERTH_ENFORCE_GRACE_SECONDS: "5",
    BERTH_ENFORCE_LEAD_SECONDS: "9",
    BERTH_RELEASE_ON_SHUTDOWN: "false",
    BERTH_CLUSTER_ID: "east",
    BERTH_WORKLOAD_KIND: "ReplicaSet",
    BERTH_WORKLOAD_NAME: "checkout-7f6c",
    BERTH_STATE_DIR: "/state",
    BERTH_API_SERVER: "http://127.0.0.1:1",
    BERTH_API_KEY_FILE: "/keys/key",
    BERTH_CA_BUNDLE_FILE: "/ca.pem",
    BERTH_SERVER_NAME: "berth.internal",
    BERTH_INSECURE_SKIP_TLS_VERIFY: "true",
    BERTH_ACQUIRE_TIMEOUT: "2m30s",
    BERTH_LOG_FORMAT: "json",
    BERTH_LOG_LEVEL: "warn",
    POD_NAMESPACE: "prod",
    POD_NAME: "checkout-7f6c-j4n8x",
    POD_UID: UID,
  };
  const fromEnv = loadConfig(full, []);
  assert.deepEqual(JSON.parse(JSON.stringify(fromEnv)), {
    leaseName: "a",
    leaseNamespace: "ns-a",
    mode: "runtime-singleton",
    enforce: "signal",
    signalTarget: "nginx",
    ttlSeconds: 60,
    heartbeatMs: 7000,
    enforceGraceSeconds: 5,
    enforceLeadMs: 9000,
    releaseOnShutdown: false,
    holder:
      `east/prod:ReplicaSet:checkout-7f6c:pod:checkout-7f6c-j4n8x:uid:${UID}`,
    stateDir: "/state",
    apiServer: "http://127.0.0.1:1",
    apiKeyFile: "/keys/key",
    caBundleFile: "/ca.pem",
    serverName: "berth.internal",
    insecureSkipTlsVerify: true,
    acquireTimeoutMs: 150000,
    logFormat: "json",
    logLevel: "WARN",
  });
  // The same configuration from flags alone.
  const args = CONFIG_SETTINGS.flatMap((s) =>
    full[s.env] === undefined ? [] : [`--${s.flag}=${full[s.env]}`]
  );
  assert.deepEqual(
    JSON.parse(JSON.stringify(loadConfig({}, args))),
    JSON.parse(JSON.stringify(fromEnv)),
  );
  // Covered elsewhere: they change the holder / conflict with the key file.
  assert.deepEqual(
    CONFIG_SETTINGS.filter((s) => full[s.env] === undefined).map((s) => s.flag),
    ["holder-identity", "api-key"],
  );
});

Deno.test("config: a flag overrides env, and an explicitly empty flag overrides too", () => {
  assert.equal(loadConfig(env(), ["--lease-name=other"]).leaseName, "other");
  assert.equal(loadConfig(env(), ["--ttl-seconds", "90"]).ttlSeconds, 90);
  assert.equal(
    loadConfig(env({ BERTH_RELEASE_ON_SHUTDOWN: "false" }), [
      "--release-on-shutdown",
    ])
      .releaseOnShutdown,
    true,
  );
  assert.equal(
    problem(() => loadConfig(env(), ["--lease-name="])),
    "lease name is required (set BERTH_LEASE_NAME or --lease-name)",
  );
  assert.equal(
    problem(() => loadConfig(env(), ["--lease-name", ""])),
    "lease name is required (set BERTH_LEASE_NAME or --lease-name)",
  );
  assert.equal(
    problem(() => loadConfig(env(), ["--lease-namespace="])),
    "lease namespace is required (set --lease-namespace or POD_NAMESPACE), or set BERTH_LEASE_NAMESPACE",
  );
  assert.equal(
    problem(() => loadConfig(env(), ["--ttl-seconds="])),
    '--ttl-seconds="": must be an integer number of seconds',
  );
  assert.equal(
    problem(() => loadConfig(env(), ["--mode="])),
    'invalid mode "" (want "startup-gate" or "runtime-singleton")',
  );
  assert.equal(
    problem(() => loadConfig(env(), ["--api-server="])),
    "api server URL is required (set BERTH_API_SERVER or --api-server)",
  );
  assert.match(
    problem(() => loadConfig(env(), ["--state-dir="])),
    /^state directory/,
  );
  assert.match(
    problem(() => loadConfig(env(), ["--pod-uid="])),
    /^POD_UID is required/,
  );
});

Deno.test("config: an empty env variable counts as unset", () => {
  const c = loadConfig(
    env({
      BERTH_MODE: "",
      BERTH_HEARTBEAT_SECONDS: "",
      BERTH_STATE_DIR: "",
      BERTH_LEASE_NAMESPACE: "",
      BERTH_RELEASE_ON_SHUTDOWN: "",
      BERTH_ACQUIRE_TIMEOUT: "",
      BERTH_LOG_FORMAT: "",
      BERTH_HOLDER_IDENTITY: "",
    }),
    [],
  );
  assert.equal(c.mode, "runtime-singleton");
  assert.equal(c.heartbeatMs, 10000);
  assert.equal(c.stateDir, "/berth");
  assert.equal(c.leaseNamespace, "prod");
  assert.equal(c.releaseOnShutdown, true);
  assert.equal(c.acquireTimeoutMs, undefined);
  assert.equal(c.logFormat, "text");
  assert.equal(c.holder, `prod/pod:checkout-7f6c-j4n8x:uid:${UID}`);
  assert.equal(
    problem(() => loadConfig(env({ BERTH_TTL_SECONDS: "" }), [])),
    "ttl must be positive and at most 2147483647 seconds (the API limit); set BERTH_TTL_SECONDS or --ttl-seconds",
  );
});

Deno.test("config: a malformed env value is fatal even when a flag overrides it", () => {
  const cases: [Env, string[], string][] = [
    [
      { BERTH_TTL_SECONDS: "soon" },
      ["--ttl-seconds=30"],
      'BERTH_TTL_SECONDS="soon": must be an integer number of seconds',
    ],
    [
      { BERTH_RELEASE_ON_SHUTDOWN: "yes" },
      ["--release-on-shutdown=false"],
      'BERTH_RELEASE_ON_SHUTDOWN="yes": must be a boolean',
    ],
    [
      { BERTH_ACQUIRE_TIMEOUT: "5" },
      ["--acquire-timeout=5s"],
      "BERTH_ACQUIRE_TIMEOUT: missing unit",
    ],
    [
      { BERTH_LOG_FORMAT: "xml" },
      ["--log-format=json"],
      'BERTH_LOG_FORMAT="xml": want',
    ],
    // Env is parsed before any flag: the env problem is reported first.
    [
      { BERTH_HEARTBEAT_SECONDS: "1s" },
      ["--ttl-seconds=x"],
      "BERTH_HEARTBEAT_SECONDS=",
    ],
  ];
  for (const [over, args, want] of cases) {
    assert.ok(
      problem(() => loadConfig(env(over), args)).startsWith(want),
      want,
    );
  }
});

Deno.test("config: integers are plain base-10 with checked range", () => {
  for (
    const [text, n] of [["30", 30], ["+30", 30], ["030", 30], ["07", 7], [
      "2147483647",
      2147483647,
    ]] as const
  ) {
    assert.equal(
      loadConfig(env({ BERTH_TTL_SECONDS: text }), []).ttlSeconds,
      n,
    );
    if (text !== "030") {
      assert.equal(
        loadConfig(env(), [`--ttl-seconds=${text}`]).ttlSeconds,
        n,
      );
    }
  }
  for (
    const text of [" 30", "30 ", "30s", "3.0", "1e3", "٣٠", "-", "+", "3__0"]
  ) {
    assert.equal(
      problem(() => loadConfig(env({ BERTH_TTL_SECONDS: text }), [])),
      `BERTH_TTL_SECONDS=${
        JSON.stringify(text)
      }: must be an integer number of seconds`,
    );
    assert.equal(
      problem(() => loadConfig(env(), [`--ttl-seconds=${text}`])),
      `--ttl-seconds=${
        JSON.stringify(text)
      }: must be an integer number of seconds`,
    );
  }
  // Env: Go's strconv.Atoi, plain base 10 like this helper.
  for (const text of ["0x1e", "3_0", "0o36", "0b11110"]) {
    assert.equal(
      problem(() => loadConfig(env({ BERTH_TTL_SECONDS: text }), [])),
      `BERTH_TTL_SECONDS=${
        JSON.stringify(text)
      }: must be an integer number of seconds`,
    );
  }
  // Beyond the exactly representable range: rejected, not rounded.
  assert.match(
    problem(() =>
      loadConfig(
        env({ BERTH_ENFORCE_GRACE_SECONDS: "99999999999999999999" }),
        [],
      )
    ),
    /^BERTH_ENFORCE_GRACE_SECONDS="99999999999999999999": must be an integer number of seconds \(this one is out of range\)$/,
  );
  // In range for the parser, beyond the API: validation says so, naming
  // the value and where it came from after Go's words.
  const ttl =
    "ttl must be positive and at most 2147483647 seconds (the API limit)";
  assert.equal(
    problem(() => loadConfig(env({ BERTH_TTL_SECONDS: "2147483648" }), [])),
    `${ttl}: BERTH_TTL_SECONDS=2147483648`,
  );
  for (
    const [given, args] of [["0", []], ["-5", []], ["1", [
      "--ttl-seconds",
      "99999999999",
    ]]] as const
  ) {
    const source = args.length
      ? "--ttl-seconds=99999999999"
      : `BERTH_TTL_SECONDS=${given}`;
    assert.equal(
      problem(() => loadConfig(env({ BERTH_TTL_SECONDS: given }), [...args])),
      `${ttl}: ${source}`,
    );
  }
  assert.equal(
    problem(() => loadConfig(env(), ["--ttl-seconds=0"])),
    `${ttl}: --ttl-seconds=0`,
  );
});

Deno.test("config: an integer flag the Go helper reads as another number, or reads where plain decimal does not, is refused with Go's reading", () => {
  assert.equal(
    problem(() => loadConfig(env(), ["--ttl-seconds=030"])),
    '--ttl-seconds="030": the Go helper reads a leading zero as octal (24, not 30); write 24 or 30 without the leading zero, which both helpers read alike',
  );
  assert.equal(
    problem(() => loadConfig(env(), ["--heartbeat-seconds", "+010"])),
    '--heartbeat-seconds="+010": the Go helper reads a leading zero as octal (8, not 10); write 8 or 10 without the leading zero, which both helpers read alike',
  );
  for (
    const [text, go] of [
      ["0x1e", 30],
      ["3_0", 30],
      ["0o36", 30],
      ["0b11110", 30],
      ["0X1E", 30],
      ["-0x1", -1],
    ] as const
  ) {
    assert.equal(
      problem(() => loadConfig(env(), [`--ttl-seconds=${text}`])),
      `--ttl-seconds=${
        JSON.stringify(text)
      }: the Go helper reads it as ${go} (Go integer syntax), this one reads plain decimal only; write ${go}`,
    );
  }
  assert.equal(
    problem(() => loadConfig(env(), ["--enforce-grace-seconds=08"])),
    '--enforce-grace-seconds="08": the Go helper refuses it (a leading zero means octal there); write 8 without the leading zero, which both helpers read alike',
  );
  // The same number in both: accepted.
  assert.equal(
    loadConfig(env(), ["--enforce-grace-seconds=00"]).enforceGraceSeconds,
    0,
  );
});

Deno.test("config: booleans take exactly Go's ParseBool spellings", () => {
  for (const t of ["1", "t", "T", "TRUE", "true", "True"]) {
    assert.equal(
      loadConfig(env({ BERTH_INSECURE_SKIP_TLS_VERIFY: t }), [])
        .insecureSkipTlsVerify,
      true,
    );
    assert.equal(
      loadConfig(env(), [`--insecure-skip-tls-verify=${t}`])
        .insecureSkipTlsVerify,
      true,
    );
  }
  for (const f of ["0", "f", "F", "FALSE", "false", "False"]) {
    assert.equal(
      loadConfig(env({ BERTH_INSECURE_SKIP_TLS_VERIFY: f }), [])
        .insecureSkipTlsVerify,
      false,
    );
    assert.equal(
      loadConfig(env(), [`--release-on-shutdown=${f}`]).releaseOnShutdown,
      false,
    );
  }
  for (const bad of ["yes", "no", "on", "tRUE", " true", "2"]) {
    assert.match(
      problem(() => loadConfig(env({ BERTH_RELEASE_ON_SHUTDOWN: bad }), [])),
      /^BERTH_RELEASE_ON_SHUTDOWN=".*": must be a boolean/,
    );
    assert.match(
      problem(() => loadConfig(env(), [`--release-on-shutdown=${bad}`])),
      /^--release-on-shutdown=".*": must be a boolean/,
    );
  }
  assert.match(
    problem(() => loadConfig(env(), ["--release-on-shutdown="])),
    /^--release-on-shutdown="": must be a boolean/,
  );
});

Deno.test("config: boolean flags follow Go: bare means true, a separate word is not a value", () => {
  assert.equal(
    loadConfig(env(), ["--insecure-skip-tls-verify"]).insecureSkipTlsVerify,
    true,
  );
  assert.equal(
    loadConfig(env(), ["-insecure-skip-tls-verify"]).insecureSkipTlsVerify,
    true,
  );
  assert.equal(
    loadConfig(env({ BERTH_MODE: "startup-gate" }), ["--release-on-shutdown"])
      .releaseOnShutdown,
    true,
  );
  assert.equal(
    loadConfig(env(), ["-release-on-shutdown=0"]).releaseOnShutdown,
    false,
  );
  const p = problem(() =>
    loadConfig(env(), ["--release-on-shutdown", "false"])
  );
  includes(p, "--release-on-shutdown=false");
  assert.match(p, /^unexpected argument/);
});

Deno.test("config: flag syntax", () => {
  assert.equal(loadConfig(env(), ["-ttl-seconds", "45"]).ttlSeconds, 45);
  assert.equal(loadConfig(env(), ["--ttl-seconds", "45"]).ttlSeconds, 45);
  assert.equal(
    loadConfig(env(), ["-ttl-seconds=45", "--ttl-seconds=46"]).ttlSeconds,
    46,
  );
  // A string flag takes the next word even when it starts with "-", as in Go.
  assert.equal(
    loadConfig(env(), ["--holder-identity", "-team/x"]).holder,
    "-team/x",
  );
  assert.equal(loadConfig(env(), ["--holder-identity=a=b"]).holder, "a=b");
  assert.equal(loadConfig(env(), ["--"]).leaseName, "checkout");
  assert.match(
    problem(() => loadConfig(env(), ["--nope=1"])),
    /^unknown flag --nope;/,
  );
  assert.match(problem(() => loadConfig(env(), ["-x"])), /^unknown flag -x;/);
  assert.equal(
    problem(() => loadConfig(env(), ["--ttl-seconds"])),
    "flag --ttl-seconds needs a value",
  );
  assert.equal(
    problem(() => loadConfig(env(), ["renew"])),
    'unexpected argument "renew": this subcommand takes flags only (--name=value)',
  );
  // A word that may be a key typed after `--api-key=` is not echoed.
  assert.equal(
    problem(() => loadConfig(env(), ["--api-key=", "kid-1:secret"])),
    "unexpected argument 2 (not shown: it may hold a secret): this subcommand takes flags only (--name=value)",
  );
  assert.doesNotMatch(
    problem(() => loadConfig(env(), ["--api-key=", "s3cr3t"])),
    /s3cr3t/,
  );
  // Nor the rest of a key that held a space, in either form.
  const rest: [string[], string][] = [
    [
      ["--api-key", "kid-1", "s3cr3t"],
      "3 (not shown: it may hold a secret) after --api-key",
    ],
    [["--api-key=kid-1", "s3cr3t"], "2 (not shown: it may hold a secret)"],
  ];
  for (const [args, shown] of rest) {
    assert.equal(
      problem(() => loadConfig(env(), args)),
      `unexpected argument ${shown}: this subcommand takes flags only (--name=value)`,
    );
  }
  // A misspelled flag is answered with the nearest one, not the whole list.
  assert.equal(
    problem(() => loadConfig(env(), ["--lease-nmae=x"])),
    "unknown flag --lease-nmae: did you mean --lease-name?",
  );
  assert.equal(
    problem(() => loadConfig(env(), ["--ttl=30"])),
    "unknown flag --ttl: did you mean --ttl-seconds?",
  );
  assert.equal(
    problem(() => parseCommandLine(["--hepl"], { help: { kind: "boolean" } })),
    "unknown flag --hepl: did you mean --help?",
  );
  assert.match(
    problem(() => loadConfig(env(), ["--", "x"])),
    /^unexpected argument/,
  );
  assert.match(
    problem(() => loadConfig(env(), ["---ttl-seconds=3"])),
    /^bad flag syntax/,
  );
  assert.match(problem(() => loadConfig(env(), ["--=3"])), /^bad flag syntax/);
});

Deno.test("config: subcommands add their own flags", () => {
  const extra = {
    help: { kind: "boolean" as const, short: "h", help: "show this help" },
    "max-age": { kind: "value" as const, value: "DURATION", help: "limit" },
  };
  assert.deepEqual(parseCommandLine(["-h"], extra), {
    flags: {},
    extra: { help: true },
  });
  assert.deepEqual(
    parseCommandLine(["--help=false", "--ttl-seconds=5"], extra),
    {
      flags: { "ttl-seconds": "5" },
      extra: { help: false },
    },
  );
  // --help works without a valid configuration; the value of a flag is taken raw.
  assert.deepEqual(
    parseCommandLine(["--max-age", "-1s", "--lease-name="], extra),
    {
      flags: { "lease-name": "" },
      extra: { "max-age": "-1s" },
    },
  );
  assert.match(
    problem(() => parseCommandLine(["--help=maybe"], extra)),
    /^--help="maybe": must be a boolean/,
  );
  // A command-line mistake, reported in the log format given with it.
  assert.throws(
    () => parseCommandLine(["--log-format=json", "--help=maybe"], extra),
    (e) =>
      e instanceof UsageError &&
      e.given["log-format"]?.at(-1) === "json",
  );
  assert.throws(
    () => parseCommandLine([], { mode: { kind: "value" } }),
    /collides/,
  );
  const { flags } = parseCommandLine(["--lease-name=x"], extra);
  assert.equal(resolveConfig(env(), flags).leaseName, "x");
  const help = configFlagsHelp({ extra });
  includes(help, "Flags:\n  --help");
  includes(help, "--help");
  includes(help, "-h");
  includes(help, "--max-age DURATION");
});

Deno.test("config: the help text lists every flag with its env variable and default", () => {
  const CONFIG_FLAGS_HELP = configFlagsHelp();
  for (const s of CONFIG_SETTINGS) {
    includes(CONFIG_FLAGS_HELP, `--${s.flag}`);
    includes(CONFIG_FLAGS_HELP, `env ${s.env};`);
    includes(CONFIG_FLAGS_HELP, `default: ${s.default}`);
  }
  for (
    const e of [
      "BERTH_LEASE_NAME",
      "BERTH_SIGNAL_TARGET",
      "BERTH_ACQUIRE_TIMEOUT",
      "BERTH_ENFORCE_LEAD_SECONDS",
      "BERTH_LOG_FORMAT",
      "POD_UID",
    ]
  ) includes(CONFIG_FLAGS_HELP, e);
});

Deno.test("config: lease namespace defaults to the pod namespace, flag included", () => {
  assert.equal(
    loadConfig(env(), ["--pod-namespace=staging"]).leaseNamespace,
    "staging",
  );
  assert.equal(
    loadConfig(env(), ["--pod-namespace=staging"]).holder,
    `staging/pod:checkout-7f6c-j4n8x:uid:${UID}`,
  );
  const c = loadConfig(env({ BERTH_LEASE_NAMESPACE: "shared" }), []);
  assert.equal(c.leaseNamespace, "shared");
  // The holder names the pod's namespace, not the lease's.
  assert.equal(c.holder, `prod/pod:checkout-7f6c-j4n8x:uid:${UID}`);
});

Deno.test("config: the heartbeat defaults to TTL/3 exactly", () => {
  assert.equal(
    loadConfig(env({ BERTH_TTL_SECONDS: "10" }), []).heartbeatMs,
    10000 / 3,
  );
  assert.equal(
    loadConfig(env({ BERTH_TTL_SECONDS: "31" }), []).heartbeatMs,
    31000 / 3,
  );
  assert.equal(
    loadConfig(env({ BERTH_HEARTBEAT_SECONDS: "4" }), []).heartbeatMs,
    4000,
  );
  assert.equal(
    loadConfig(env({ BERTH_TTL_SECONDS: "2147483647" }), []).heartbeatMs,
    2147483647000 / 3,
  );
});

interface Case {
  name: string;
  env?: Env;
  args?: string[];
  /** Exact problem, or a RegExp where the text carries values. */
  want: string | RegExp;
  /** Only a problem in runtime-singleton mode. */
  runtimeOnly?: boolean;
  /** Switches to startup-gate mode. */
  startupGate?: boolean;
}

/** One case per validation item, in the order they are checked. */
const ORDERED: Case[] = [
  {
    name: "1",
    env: { BERTH_LEASE_NAME: undefined },
    want: "lease name is required (set BERTH_LEASE_NAME or --lease-name)",
  },
  {
    name: "2",
    env: { POD_NAMESPACE: undefined },
    want:
      "lease namespace is required (set --lease-namespace or POD_NAMESPACE), or set BERTH_LEASE_NAMESPACE",
  },
  {
    name: "3",
    env: { BERTH_MODE: "Runtime-Singleton" },
    want:
      'invalid mode "Runtime-Singleton" (want "startup-gate" or "runtime-singleton")',
  },
  {
    name: "4",
    env: { BERTH_ENFORCE: "kill" },
    want: 'invalid enforce "kill" (want "probe" or "signal")',
  },
  {
    name: "5",
    env: { BERTH_ENFORCE: "signal", BERTH_SIGNAL_TARGET: undefined },
    want:
      /every process in the shared PID namespace, including co-located sidecars.*BERTH_SIGNAL_TARGET|BERTH_SIGNAL_TARGET.*every process in the shared PID namespace, including co-located sidecars/,
    runtimeOnly: true,
  },
  {
    name: "6",
    env: { POD_UID: undefined },
    want: /^POD_UID is required/,
    runtimeOnly: true,
  },
  {
    name: "7",
    env: { BERTH_TTL_SECONDS: "0" },
    want:
      "ttl must be positive and at most 2147483647 seconds (the API limit): BERTH_TTL_SECONDS=0",
  },
  {
    name: "8",
    env: { BERTH_HEARTBEAT_SECONDS: "30" },
    want: /^heartbeat must be less than the ttl \(/,
  },
  {
    name: "9",
    env: { BERTH_ENFORCE_GRACE_SECONDS: "-1" },
    want: "enforce grace must not be negative",
  },
  {
    name: "10",
    env: { BERTH_API_SERVER: undefined },
    want: "api server URL is required (set BERTH_API_SERVER or --api-server)",
  },
  {
    name: "11",
    env: { BERTH_API_KEY: KEY, BERTH_API_KEY_FILE: "/keys/key" },
    want:
      "api key and api key file are mutually exclusive: BERTH_API_KEY and BERTH_API_KEY_FILE are both set; set only one",
  },
  {
    name: "12 namespace",
    env: { POD_NAMESPACE: "Prod" },
    want:
      /^invalid namespace "Prod": must be an RFC 1123 DNS label \(lowercase alphanumerics and '-', at most 63 characters\): a lowercase RFC 1123 label .*; set BERTH_LEASE_NAMESPACE or --lease-namespace/,
  },
  {
    name: "12 name",
    env: { BERTH_LEASE_NAME: "check_out" },
    want:
      /^invalid name "check_out": must be an RFC 1123 DNS subdomain \(lowercase alphanumerics, '-' and '.', at most 253 characters\): a lowercase RFC 1123 subdomain .*; set BERTH_LEASE_NAME or --lease-name/,
  },
  {
    name: "12 key",
    env: { BERTH_LEASE_NAME: "a".repeat(200), POD_NAMESPACE: "n".repeat(60) },
    want:
      /^invalid key n{60}\/a{200}: namespace and name joined with '.' must be at most 253 characters, got 261; shorten/,
  },
  {
    name: "12 empty startup-gate holder",
    env: {
      BERTH_MODE: "startup-gate",
      BERTH_LEASE_NAMESPACE: "prod",
      POD_NAMESPACE: undefined,
      POD_NAME: undefined,
    },
    want: /^holder identity is empty/,
    startupGate: true,
  },
  {
    name: "13 state dir",
    args: ["--state-dir="],
    want: /^state directory must not be empty/,
  },
  {
    name: "14 url",
    env: { BERTH_API_SERVER: "berth.example:8443" },
    want: /^api server URL "berth.example:8443" is not an http/,
  },
  {
    name: "14 url with credentials",
    env: { BERTH_API_SERVER: "https://user:SECRET@berth.example" },
    want:
      /^api server URL "https:\/\/\*\*\*@berth.example" must not carry credentials/,
  },
  {
    name: "15 lead",
    env: { BERTH_ENFORCE_LEAD_SECONDS: "-1" },
    want: "enforce lead must not be negative",
  },
  {
    name: "16 room",
    env: { BERTH_TTL_SECONDS: "6" },
    want: /^no room to renew/,
    runtimeOnly: true,
  },
];

function check(c: Case, actual: string): void {
  if (typeof c.want === "string") assert.equal(actual, c.want, c.name);
  else assert.match(actual, c.want, c.name);
}

Deno.test("config: each validation problem, alone", () => {
  for (const c of ORDERED) {
    check(c, problem(() => loadConfig(env(c.env), c.args ?? [])));
  }
});

Deno.test("config: with two problems the earlier one in the list is reported", () => {
  let pairs = 0;
  for (let i = 0; i < ORDERED.length; i++) {
    for (let j = i + 1; j < ORDERED.length; j++) {
      const a = ORDERED[i], b = ORDERED[j];
      const keys = Object.keys(b.env ?? {});
      if (Object.keys(a.env ?? {}).some((k) => keys.includes(k))) continue;
      if (
        (a.startupGate && b.runtimeOnly) || (b.startupGate && a.runtimeOnly)
      ) continue;
      const merged = { ...a.env, ...b.env };
      check(
        a,
        problem(() =>
          loadConfig(env(merged), [...a.args ?? [], ...b.args ?? []])
        ),
      );
      pairs++;
    }
  }
  assert.ok(pairs > 90, `only ${pairs} pairs`);
});

Deno.test("config: signal mode needs a target only in runtime-singleton", () => {
  const p = problem(() => loadConfig(env({ BERTH_ENFORCE: "signal" }), []));
  includes(p, "every process in the shared PID namespace");
  includes(p, "co-located sidecars");
  includes(p, "BERTH_SIGNAL_TARGET");
  const gate = loadConfig(
    env({ BERTH_ENFORCE: "signal", BERTH_MODE: "startup-gate" }),
    [],
  );
  assert.equal(gate.signalTarget, "");
  assert.equal(
    loadConfig(env({ BERTH_ENFORCE: "signal" }), ["--signal-target=nginx"])
      .signalTarget,
    "nginx",
  );
});

Deno.test("config: heartbeat must be below the ttl; 0 or less means TTL/3, as in the Go helper", () => {
  for (const hb of ["30", "31"]) {
    const p = problem(() =>
      loadConfig(env({ BERTH_HEARTBEAT_SECONDS: hb }), [])
    );
    assert.match(p, /^heartbeat must be less than the ttl \(/);
    includes(p, `heartbeat ${hb}s, ttl 30s`);
  }
  for (const hb of ["0", "-3"]) {
    assert.equal(
      loadConfig(env({ BERTH_HEARTBEAT_SECONDS: hb }), []).heartbeatMs,
      10_000,
    );
    assert.equal(
      loadConfig(env(), [`--heartbeat-seconds=${hb}`]).heartbeatMs,
      10_000,
    );
  }
  assert.equal(
    loadConfig(
      env({ BERTH_HEARTBEAT_SECONDS: "25", BERTH_ENFORCE_LEAD_SECONDS: "4" }),
      [],
    ).heartbeatMs,
    25000,
  );
});

Deno.test("config: enforce lead defaults to what the enforcer needs", () => {
  assert.equal(loadConfig(env(), []).enforceLeadMs, 4000);
  const signal = { BERTH_ENFORCE: "signal", BERTH_SIGNAL_TARGET: "nginx" };
  // grace + 1 s, but never less than the probe's 4 s: the probe is the
  // backstop when the sidecar is dead.
  assert.equal(loadConfig(env(signal), []).enforceLeadMs, 4000);
  assert.equal(
    loadConfig(env({ ...signal, BERTH_ENFORCE_GRACE_SECONDS: "3" }), [])
      .enforceLeadMs,
    4000,
  );
  assert.equal(
    loadConfig(env({ ...signal, BERTH_ENFORCE_GRACE_SECONDS: "5" }), [])
      .enforceLeadMs,
    6000,
  );
  assert.equal(
    loadConfig(env({ BERTH_ENFORCE_LEAD_SECONDS: "2" }), []).enforceLeadMs,
    2000,
  );
  assert.equal(
    loadConfig(env(), ["--enforce-lead-seconds=0"]).enforceLeadMs,
    0,
  );
});

Deno.test("config: heartbeat plus lead must leave room to renew before the gate closes", () => {
  // Default heartbeat TTL/3 and probe lead 4 s: TTL*2/3 > 4 needs TTL >= 7.
  const six = problem(() => loadConfig(env({ BERTH_TTL_SECONDS: "6" }), []));
  includes(six, "smallest workable ttl for this heartbeat and lead is 7s");
  includes(six, "BERTH_TTL_SECONDS");
  includes(six, "BERTH_HEARTBEAT_SECONDS");
  includes(six, "BERTH_ENFORCE_LEAD_SECONDS");
  assert.equal(loadConfig(env({ BERTH_TTL_SECONDS: "7" }), []).ttlSeconds, 7);
  // Explicit heartbeat: heartbeat + lead < TTL, 3 + 4 = 7 is not enough.
  const hb = { BERTH_HEARTBEAT_SECONDS: "3" };
  includes(
    problem(() => loadConfig(env({ ...hb, BERTH_TTL_SECONDS: "7" }), [])),
    "smallest workable ttl for this heartbeat and lead is 8s",
  );
  assert.equal(
    loadConfig(env({ ...hb, BERTH_TTL_SECONDS: "8" }), []).heartbeatMs,
    3000,
  );
  // Signal, grace 10 s: lead 11 s, TTL*2/3 > 11 needs TTL >= 17.
  const sig = {
    BERTH_ENFORCE: "signal",
    BERTH_SIGNAL_TARGET: "nginx",
    BERTH_ENFORCE_GRACE_SECONDS: "10",
  };
  const p = problem(() =>
    loadConfig(env({ ...sig, BERTH_TTL_SECONDS: "16" }), [])
  );
  includes(p, "is 17s");
  includes(p, "BERTH_ENFORCE_GRACE_SECONDS");
  assert.equal(
    loadConfig(env({ ...sig, BERTH_TTL_SECONDS: "17" }), []).enforceLeadMs,
    11000,
  );
  // An explicit lead is what counts.
  includes(
    problem(() => loadConfig(env({ BERTH_ENFORCE_LEAD_SECONDS: "20" }), [])),
    "is 31s",
  );
  assert.equal(
    loadConfig(
      env({ BERTH_TTL_SECONDS: "2", BERTH_ENFORCE_LEAD_SECONDS: "1" }),
      [],
    ).ttlSeconds,
    2,
  );
  // startup-gate has no renewer and no gate: a short TTL is fine.
  assert.equal(
    loadConfig(env({ BERTH_MODE: "startup-gate", BERTH_TTL_SECONDS: "1" }), [])
      .ttlSeconds,
    1,
  );
});

Deno.test("config: acquire timeout takes Go durations; 0 or absent means none", () => {
  const cases: [string, number][] = [
    ["30s", 30_000],
    ["1m0s", 60_000],
    ["2m30s", 150_000],
    ["1h0m0s", 3_600_000],
    ["1.5s", 1_500],
    ["300ms", 300],
  ];
  for (const [text, ms] of cases) {
    assert.equal(
      loadConfig(env({ BERTH_ACQUIRE_TIMEOUT: text }), []).acquireTimeoutMs,
      ms,
    );
    assert.equal(
      loadConfig(env(), [`--acquire-timeout=${text}`]).acquireTimeoutMs,
      ms,
    );
  }
  for (const none of ["0", "0s"]) {
    const c = loadConfig(env({ BERTH_ACQUIRE_TIMEOUT: none }), []);
    assert.equal(c.acquireTimeoutMs, undefined);
  }
  assert.equal(
    loadConfig(env({ BERTH_ACQUIRE_TIMEOUT: "30s" }), ["--acquire-timeout=0"])
      .acquireTimeoutMs,
    undefined,
  );
  for (const bad of ["soon", "30", "-1s", "1d"]) {
    assert.match(
      problem(() => loadConfig(env({ BERTH_ACQUIRE_TIMEOUT: bad }), [])),
      /^BERTH_ACQUIRE_TIMEOUT: /,
    );
  }
  assert.match(
    problem(() => loadConfig(env(), ["--acquire-timeout="])),
    /^--acquire-timeout: /,
  );
});

Deno.test("config: log level, from env or flag, any case; a typo is a clear error", () => {
  assert.equal(loadConfig(env(), []).logLevel, "INFO");
  assert.equal(
    loadConfig(env({ BERTH_LOG_LEVEL: "debug" }), []).logLevel,
    "DEBUG",
  );
  assert.equal(
    loadConfig(env({ BERTH_LOG_LEVEL: "debug" }), ["--log-level=ERROR"])
      .logLevel,
    "ERROR",
  );
  assert.equal(
    problem(() => loadConfig(env(), ["--log-level=verbose"])),
    '--log-level="verbose": want "debug", "info", "warn" or "error"',
  );
  assert.equal(
    problem(() => loadConfig(env({ BERTH_LOG_LEVEL: "trace" }), [])),
    'BERTH_LOG_LEVEL="trace": want "debug", "info", "warn" or "error"',
  );
});

Deno.test("config: log format", () => {
  assert.equal(
    loadConfig(env({ BERTH_LOG_FORMAT: "json" }), []).logFormat,
    "json",
  );
  assert.equal(
    loadConfig(env({ BERTH_LOG_FORMAT: "json" }), ["--log-format=text"])
      .logFormat,
    "text",
  );
  assert.equal(
    problem(() => loadConfig(env(), ["--log-format=JSON"])),
    '--log-format="JSON": want "text" or "json"',
  );
});

Deno.test("config: api key and key file are mutually exclusive across env and flags", () => {
  // Go's words first, then both settings as given and the fix.
  const msg = "api key and api key file are mutually exclusive";
  assert.equal(
    problem(() =>
      loadConfig(env({ BERTH_API_KEY: KEY }), ["--api-key-file=/k"])
    ),
    `${msg}: BERTH_API_KEY and --api-key-file are both set; set only one`,
  );
  assert.equal(
    problem(() =>
      loadConfig(env({ BERTH_API_KEY_FILE: "/k" }), [`--api-key=${KEY}`])
    ),
    `${msg}: --api-key and BERTH_API_KEY_FILE are both set; set only one`,
  );
  // An explicitly empty flag clears the env value.
  const c = loadConfig(env({ BERTH_API_KEY: KEY }), [
    "--api-key=",
    "--api-key-file=/k",
  ]);
  assert.equal(c.apiKey, undefined);
  assert.equal(c.apiKeyFile, "/k");
});

Deno.test("config: the API key is a Secret and never appears in output or errors", () => {
  const c = loadConfig(env({ BERTH_API_KEY: KEY }), []);
  assert.ok(c.apiKey instanceof Secret);
  assert.equal(c.apiKey.reveal(), KEY);
  assert.ok(!JSON.stringify(c).includes(KEY));
  assert.ok(!`${c.apiKey}`.includes(KEY));
  const failures: [Env, string[]][] = [
    [{ BERTH_API_KEY: KEY, BERTH_API_KEY_FILE: "/k" }, []],
    [{ BERTH_API_KEY: KEY, BERTH_LEASE_NAME: undefined }, []],
    [{}, ["--api-key=", KEY]], // a space typed after "="
    [{}, ["--api-kee=" + KEY]],
    [{}, ["--insecure-skip-tls-verify", KEY]],
    [{}, ["--api-key=" + KEY, "--api-key-file", "/k"]],
    [{}, ["-" + KEY]],
  ];
  for (const [over, args] of failures) {
    const p = problem(() => loadConfig(env(over), args));
    assert.ok(!p.includes(KEY) && !p.includes("kid-1"), p);
  }
});

Deno.test("config: release on shutdown can be set either way in both modes", () => {
  assert.equal(
    loadConfig(env({ BERTH_RELEASE_ON_SHUTDOWN: "false" }), [])
      .releaseOnShutdown,
    false,
  );
  assert.equal(
    loadConfig(
      env({ BERTH_MODE: "startup-gate", BERTH_RELEASE_ON_SHUTDOWN: "true" }),
      [],
    )
      .releaseOnShutdown,
    true,
  );
});

Deno.test("config: holder identity in the configuration", () => {
  const explicit = "  team-a/checkout  ";
  const c = loadConfig(
    env({ BERTH_HOLDER_IDENTITY: explicit, POD_UID: undefined }),
    [],
  );
  assert.equal(c.holder, explicit);
  assert.equal(
    loadConfig(env(), [`--holder-identity=${explicit}`]).holder,
    explicit,
  );
  // An explicit holder over the API's limit is refused rather than retried forever.
  assert.match(
    problem(() =>
      loadConfig(env({ BERTH_HOLDER_IDENTITY: "é".repeat(127) }), [])
    ),
    /254 bytes/,
  );
  assert.match(
    problem(() => loadConfig(env({ POD_UID: "a/b" }), [])),
    /^invalid POD_UID "a\/b"/,
  );
  assert.match(
    problem(() => loadConfig(env({ BERTH_CLUSTER_ID: "x".repeat(250) }), [])),
    /^derived holder identity is \d+ bytes/,
  );
  assert.equal(
    loadConfig(
      env({ BERTH_CLUSTER_ID: "east", BERTH_MODE: "startup-gate" }),
      [],
    ).holder,
    "east/prod:checkout-7f6c-j4n8x",
  );
});

Deno.test("config: a role passes its own lead default as a parameter (run: enforce grace + 1)", () => {
  const run = { leadDefault: SIGNAL_SENDER_LEAD_DEFAULT };
  // With its own grace default: 5 s at TTL 30.
  assert.equal(loadConfig(env(), [], run).enforceLeadMs, 6000);
  assert.equal(
    loadConfig(env({ BERTH_ENFORCE_GRACE_SECONDS: "3" }), [], run)
      .enforceLeadMs,
    4000,
  );
  assert.equal(
    loadConfig(env(), ["--enforce-grace-seconds=5"], run).enforceLeadMs,
    6000,
  );
  // An explicit lead still wins, and the environment is not rewritten.
  const e = env({ BERTH_ENFORCE_GRACE_SECONDS: "3" });
  assert.equal(
    loadConfig(e, ["--enforce-lead-seconds=5"], run).enforceLeadMs,
    5000,
  );
  assert.equal(e.BERTH_ENFORCE_LEAD_SECONDS, undefined);
  // The room check states the default that was used.
  const p = problem(() =>
    loadConfig(
      env({ BERTH_TTL_SECONDS: "8", BERTH_ENFORCE_GRACE_SECONDS: "5" }),
      [],
      run,
    )
  );
  includes(
    p,
    "the enforce lead (6s, the default for a process group stopped by signals: enforce grace + 1s)",
  );
  includes(p, "BERTH_ENFORCE_GRACE_SECONDS");
});

Deno.test("config: a signalled workload's explicit lead must cover the grace + 1 s, or SIGKILL would come after the next holder starts", () => {
  const signal = env({
    BERTH_ENFORCE: "signal",
    BERTH_SIGNAL_TARGET: "nginx",
    BERTH_ENFORCE_GRACE_SECONDS: "30",
    BERTH_TTL_SECONDS: "120",
  });
  assert.equal(
    problem(() =>
      loadConfig({ ...signal, BERTH_ENFORCE_LEAD_SECONDS: "1" }, [])
    ),
    "enforce lead BERTH_ENFORCE_LEAD_SECONDS=1 is shorter than the enforce grace (30s) + 1s: " +
      "SIGKILL goes out 30s after SIGTERM, so a workload that ignores SIGTERM could still run when the next holder starts; " +
      "the smallest lead that works is 31s: set BERTH_ENFORCE_LEAD_SECONDS to at least 31, or leave it unset for the default",
  );
  // The setting is named as given: a flag, even one overriding a good variable.
  const flag = problem(() =>
    loadConfig({ ...signal, BERTH_ENFORCE_LEAD_SECONDS: "31" }, [
      "--enforce-lead-seconds=30",
    ])
  );
  includes(flag, "enforce lead --enforce-lead-seconds=30 is shorter");
  includes(flag, "set --enforce-lead-seconds to at least 31");
  // startup-gate stops nothing at a deadline: its lead is not checked.
  assert.equal(
    loadConfig(env({ ...signal, BERTH_MODE: "startup-gate" }), [
      "--enforce-lead-seconds=1",
    ]).enforceLeadMs,
    1_000,
  );
  // grace + 1 s is enough; the default is never too short.
  assert.equal(
    loadConfig({ ...signal, BERTH_ENFORCE_LEAD_SECONDS: "31" }, [])
      .enforceLeadMs,
    31_000,
  );
  assert.equal(loadConfig(signal, []).enforceLeadMs, 31_000);
  // A negative lead is refused as before, and before the room to renew.
  assert.equal(
    problem(() => loadConfig(signal, ["--enforce-lead-seconds=-1"])),
    "enforce lead must not be negative",
  );
  assert.match(
    problem(() =>
      loadConfig({ ...signal, BERTH_TTL_SECONDS: "2" }, [
        "--enforce-lead-seconds=1",
      ])
    ),
    /^enforce lead --enforce-lead-seconds=1 is shorter/,
  );
  // The probe's enforcer sends no signal: the grace does not bind the lead.
  assert.equal(
    loadConfig({ ...signal, BERTH_ENFORCE: "probe" }, [
      "--enforce-lead-seconds=1",
    ]).enforceLeadMs,
    1000,
  );
});

Deno.test("config: run's explicit lead must cover its grace + 1 s too; its default grace fits a given lead", () => {
  const run = { leadDefault: SIGNAL_SENDER_LEAD_DEFAULT };
  const p = problem(() =>
    loadConfig(env({ BERTH_ENFORCE_GRACE_SECONDS: "5" }), [
      "--enforce-lead-seconds=3",
    ], run)
  );
  includes(p, "enforce lead --enforce-lead-seconds=3 is shorter");
  includes(p, "the enforce grace (5s)");
  includes(p, "the smallest lead that works is 6s");
  includes(
    problem(() =>
      loadConfig(env({ BERTH_ENFORCE_LEAD_SECONDS: "0" }), [], run)
    ),
    "the smallest lead that works is 1s",
  );
  // Without a grace, a given lead takes the grace it leaves: lead - 1 s.
  const c = loadConfig(env({ BERTH_ENFORCE_LEAD_SECONDS: "4" }), [], run);
  assert.deepEqual([c.enforceGraceSeconds, c.enforceLeadMs], [3, 4000]);
  const d = loadConfig(env(), [], run);
  assert.deepEqual([d.enforceGraceSeconds, d.enforceLeadMs], [5, 6000]);
});

Deno.test("config: a role's help text states its own lead default and leaves out what it does not offer", () => {
  const run = configFlagsHelp({
    leadDefault: SIGNAL_SENDER_LEAD_DEFAULT,
    omit: ["mode"],
  });
  includes(run, "env BERTH_ENFORCE_LEAD_SECONDS; default: enforce grace + 1]");
  assert.doesNotMatch(run, /--mode|startup-gate or runtime-singleton/);
  const generic = configFlagsHelp();
  includes(generic, "--mode MODE");
  includes(
    generic,
    "default: probe: 4; signal: the larger of enforce grace + 1 and 4]",
  );
});

Deno.test("redactUrl hides user information, also in URLs that do not parse", () => {
  const cases: [string, string][] = [
    ["https://user:SECRET@berth.example", "https://***@berth.example"],
    ["https://SECRET@berth.example:8443/x", "https://***@berth.example:8443/x"],
    ["https://host:host@host/p@q", "https://***@host/p@q"],
    ["https://a@b@host:1/x", "https://***@host:1/x"],
    ["https://u:SECRET@host:badport", "https://***@host:badport"],
    ["berth://u:SE/CRET@host", "berth://***@host"],
    ["https://berth.example/a@b", "https://berth.example/a@b"],
    ["https://berth.example", "https://berth.example"],
  ];
  for (const [url, want] of cases) {
    assert.equal(redactUrl(url), want, url);
    assert.doesNotMatch(redactUrl(url), /SECRET|SE\/CRET/);
  }
});

Deno.test("apiServerProblem refuses credentials, queries, fragments and empty segments, quoting the URL redacted", () => {
  assert.equal(apiServerProblem("https://berth.example:8443"), undefined);
  assert.equal(apiServerProblem("http://127.0.0.1:8080/prefix/"), undefined);
  const creds = apiServerProblem("https://user:SECRET@berth.example")!;
  assert.match(creds, /^api server URL "https:\/\/\*\*\*@berth.example"/);
  assert.match(creds, /BERTH_API_KEY_FILE/);
  assert.doesNotMatch(creds, /SECRET/);
  assert.doesNotMatch(
    apiServerProblem("ftp://user:SECRET@berth.example")!,
    /SECRET/,
  );
  assert.doesNotMatch(
    apiServerProblem("https://user:SECRET@berth.example:99999")!,
    /SECRET/,
  );
  assert.match(apiServerProblem("https://h/?a=1")!, /query or fragment/);
  assert.match(apiServerProblem("https://h/#x")!, /query or fragment/);
  assert.match(apiServerProblem("https://h/a//b")!, /empty path segment/);
  assert.match(apiServerProblem("h:8443")!, /is not an http:\/\/ or https/);
});
