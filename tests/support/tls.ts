/**
 * A throw-away private PKI for tests that need a real TLS server on
 * 127.0.0.1: a CA, a server certificate it issued for chosen names, and a
 * second, unrelated CA to prove that trusting the wrong root fails. It shells
 * out to `openssl` so no key material is checked into the repository and
 * every run gets fresh, short-lived certificates.
 *
 * ```ts
 * const skip = opensslMissing();
 * Deno.test({ name: "...", ignore: skip !== undefined, fn: async () => {
 *   await using pki = await makeTestPki({ names: ["berth.test"] });
 *   // serve with pki.serverCert / pki.serverKey, trust pki.caCert
 * }});
 * ```
 *
 * @module
 */

/** Options for {@linkcode makeTestPki}. */
export interface TestPkiOptions {
  /**
   * Subject alternative names of the server certificate. Entries that look
   * like an IPv4 or IPv6 address become `IP:` names, everything else `DNS:`.
   * At least one is required (TLS clients ignore the common name).
   */
  names: string[];
  /**
   * The server certificate's validity period as openssl dates
   * (`YYYYMMDDHHMMSSZ`), e.g. one in the past for an expired certificate.
   * Default: from now for two days.
   */
  validity?: { notBefore: string; notAfter: string };
  /**
   * Also make {@linkcode TestPki.selfSignedCa}: a self-signed certificate
   * for `names` marked `CA:TRUE`, as a bare `openssl req -x509` makes one.
   */
  selfSignedCa?: boolean;
}

/** Paths to the PEM files of one test PKI, and how to delete them. */
export interface TestPki extends AsyncDisposable {
  /** The temporary directory holding every file below. */
  dir: string;
  /** PEM certificate of the CA that issued {@linkcode TestPki.serverCert}. */
  caCert: string;
  /** PEM leaf certificate for `names`, issued by `caCert`. */
  serverCert: string;
  /** PEM (PKCS #8) private key of `serverCert`. */
  serverKey: string;
  /** PEM certificate of a second CA that issued nothing a server here presents. */
  otherCaCert: string;
  /** With {@linkcode TestPkiOptions.selfSignedCa}: that certificate and its key. */
  selfSignedCa?: { cert: string; key: string };
  /** Removes `dir`; safe to call twice. Also run by `await using`. */
  cleanup(): Promise<void>;
}

let missing: string | undefined | null = null;

/**
 * Why TLS tests cannot run here (`openssl` not runnable), or undefined when
 * they can. Synchronous so it can feed `Deno.test({ ignore })` at load time;
 * the first call that finds it missing prints the reason once.
 */
export function opensslMissing(): string | undefined {
  if (missing !== null) return missing;
  try {
    const out = new Deno.Command("openssl", {
      args: ["version"],
      stdout: "null",
      stderr: "null",
    }).outputSync();
    missing = out.success ? undefined : "`openssl version` failed";
  } catch (e) {
    missing = `openssl is not runnable: ${(e as Error).message}`;
  }
  if (missing !== undefined) {
    console.log(`skipped: TLS tests need openssl (${missing})`);
  }
  return missing;
}

const MIN_CONFIG = `[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
`;

/**
 * Creates a CA, a server key and certificate for `options.names` signed by
 * it, and an unrelated second CA, all in a fresh temporary directory. Keys
 * are EC P-256 (fast to generate); certificates are valid for two days.
 * Throws when openssl is missing: check {@linkcode opensslMissing} first.
 */
export async function makeTestPki(options: TestPkiOptions): Promise<TestPki> {
  if (options.names.length === 0) {
    throw new Error("makeTestPki: give at least one name for the certificate");
  }
  const reason = opensslMissing();
  if (reason !== undefined) throw new Error(`makeTestPki: ${reason}`);
  const dir = await Deno.makeTempDir({ prefix: "berth-pki-" });
  const p = (name: string) => `${dir}/${name}`;
  let removed = false;
  const cleanup = async () => {
    if (removed) return;
    removed = true;
    await Deno.remove(dir, { recursive: true });
  };
  try {
    await Deno.writeTextFile(p("openssl.cnf"), MIN_CONFIG);
    await makeCa(p, "ca", "berth test CA");
    await makeCa(p, "other-ca", "berth unrelated test CA");
    const san = options.names
      .map((n) => (isIp(n) ? `IP:${n}` : `DNS:${n}`))
      .join(",");
    if (options.selfSignedCa) {
      await makeCa(p, "self-ca", options.names[0], `subjectAltName=${san}`);
    }
    await Deno.writeTextFile(
      p("server.ext"),
      [
        "basicConstraints = critical,CA:FALSE",
        "keyUsage = critical,digitalSignature",
        "extendedKeyUsage = serverAuth",
        `subjectAltName = ${san}`,
        "",
      ].join("\n"),
    );
    await openssl(
      "req",
      "-new",
      "-config",
      p("openssl.cnf"),
      ...EC_KEY,
      "-nodes",
      "-keyout",
      p("server.key"),
      "-out",
      p("server.csr"),
      "-subj",
      `/CN=${options.names[0]}`,
    );
    if (options.validity) {
      await signWithDates(p, options.validity);
    } else {
      await openssl(
        "x509",
        "-req",
        "-in",
        p("server.csr"),
        "-CA",
        p("ca.crt"),
        "-CAkey",
        p("ca.key"),
        "-set_serial",
        randomSerial(),
        "-days",
        "2",
        "-sha256",
        "-extfile",
        p("server.ext"),
        "-out",
        p("server.crt"),
      );
    }
  } catch (e) {
    await cleanup();
    throw e;
  }
  return {
    dir,
    caCert: p("ca.crt"),
    serverCert: p("server.crt"),
    serverKey: p("server.key"),
    otherCaCert: p("other-ca.crt"),
    ...(options.selfSignedCa
      ? { selfSignedCa: { cert: p("self-ca.crt"), key: p("self-ca.key") } }
      : {}),
    cleanup,
    [Symbol.asyncDispose]: cleanup,
  };
}

/** `openssl ca`, the one command that takes explicit start and end dates. */
async function signWithDates(
  p: (name: string) => string,
  validity: { notBefore: string; notAfter: string },
): Promise<void> {
  await Deno.writeTextFile(
    p("ca.cnf"),
    [
      "[ca]",
      "default_ca = c",
      "[c]",
      `database = ${p("index.txt")}`,
      `new_certs_dir = ${p("")}`,
      `serial = ${p("serial")}`,
      "default_md = sha256",
      "policy = p",
      "unique_subject = no",
      "[p]",
      "commonName = supplied",
      "",
    ].join("\n"),
  );
  await Deno.writeTextFile(p("index.txt"), "");
  await Deno.writeTextFile(p("serial"), `${randomSerial().slice(2)}\n`);
  await openssl(
    "ca",
    "-batch",
    "-config",
    p("ca.cnf"),
    "-cert",
    p("ca.crt"),
    "-keyfile",
    p("ca.key"),
    "-in",
    p("server.csr"),
    "-startdate",
    validity.notBefore,
    "-enddate",
    validity.notAfter,
    "-extfile",
    p("server.ext"),
    "-notext",
    "-out",
    p("server.crt"),
  );
}

const EC_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];

async function makeCa(
  p: (name: string) => string,
  base: string,
  cn: string,
  ...extensions: string[]
): Promise<void> {
  await openssl(
    "req",
    "-x509",
    "-config",
    p("openssl.cnf"),
    ...EC_KEY,
    "-nodes",
    "-keyout",
    p(`${base}.key`),
    "-out",
    p(`${base}.crt`),
    "-days",
    "2",
    "-sha256",
    "-set_serial",
    randomSerial(),
    "-subj",
    `/CN=${cn}`,
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
    "-addext",
    "subjectKeyIdentifier=hash",
    ...extensions.flatMap((x) => ["-addext", x]),
  );
}

async function openssl(...args: string[]): Promise<void> {
  const out = await new Deno.Command("openssl", {
    args,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) {
    const err = new TextDecoder().decode(out.stderr).trim();
    throw new Error(`openssl ${args[0]} failed (exit ${out.code}): ${err}`);
  }
}

function randomSerial(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  bytes[0] &= 0x7f; // positive
  bytes[0] |= 0x01; // never zero
  return `0x${bytes.toHex()}`;
}

function isIp(name: string): boolean {
  return /^\d{1,3}(\.\d{1,3}){3}$/.test(name) || name.includes(":");
}
