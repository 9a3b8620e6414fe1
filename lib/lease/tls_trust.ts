/**
 * What the client trusts: the system's trust store with the CA bundle added
 * to it (never put in its place), set up and checked once at start-up
 * (docs/configuration.md, "Trust").
 *
 * @module
 */

/** The system trust store files Go's `crypto/x509` reads on Linux, in its order. */
export const SYSTEM_BUNDLE_FILES: readonly string[] = [
  "/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine, distroless
  "/etc/pki/tls/certs/ca-bundle.crt", // Fedora, RHEL 6
  "/etc/ssl/ca-bundle.pem", // openSUSE
  "/etc/pki/tls/cacert.pem", // OpenELEC
  "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
  "/etc/ssl/cert.pem", // Alpine
];

/** Deno builds its root certificates from it once per process, at the first TLS use. */
export const CA_STORE_VARIABLE = "DENO_TLS_CA_STORE";

/** The system's store, then Deno's bundled Mozilla roots (what Deno trusts by default). */
export const SYSTEM_CA_STORES = "system,mozilla";

/** What {@linkcode lookPath} found at a path. */
export type PathState = "readable" | "unreadable" | "absent";

/**
 * Which root stores to trust ({@linkcode CA_STORE_VARIABLE}'s value, none to
 * leave it as it is), and what to warn about. A system file that cannot be
 * read is not named, with a warning: Deno refuses every TLS connection when
 * the system store it was told to use cannot be loaded.
 */
export function chooseCaStores(
  env: (name: string) => string | undefined,
  look: (path: string) => PathState,
): { stores?: string; warning?: string } {
  if (env(CA_STORE_VARIABLE) !== undefined) return {};
  const file = env("SSL_CERT_FILE");
  if (file !== undefined && file !== "") {
    if (look(file) === "readable") return { stores: SYSTEM_CA_STORES };
    return {
      warning:
        `SSL_CERT_FILE names ${file}, which cannot be read as a file; the system trust store is not used (Deno's bundled Mozilla roots and the CA bundle are): fix or unset SSL_CERT_FILE`,
    };
  }
  // The first system file there, as Deno takes the first it finds.
  for (const f of SYSTEM_BUNDLE_FILES) {
    const state = look(f);
    if (state === "absent") continue;
    if (state === "readable") return { stores: SYSTEM_CA_STORES };
    return {
      warning:
        `the system trust store ${f} cannot be read by this user, so it is not used (Deno's bundled Mozilla roots and the CA bundle are): make it readable, or set SSL_CERT_FILE to a readable bundle`,
    };
  }
  return {};
}

/** Whether `path` is a regular file this process can open for reading. */
export function lookPath(path: string): PathState {
  try {
    using f = Deno.openSync(path, { read: true });
    return f.statSync().isFile ? "readable" : "unreadable";
  } catch (e) {
    return e instanceof Deno.errors.NotFound ? "absent" : "unreadable";
  }
}

/**
 * The root stores `stores` names and the CA bundle's PEM blocks, checked by
 * one HTTP client built and closed before the first TLS use: Deno reads
 * {@linkcode CA_STORE_VARIABLE} only then, so the variable is removed again
 * and the processes this one starts get the environment they were given.
 *
 * @throws {Error} A configuration error naming the bundle (or the
 * certificate in it by its number), or the stores, and what to do.
 */
export function readTrust(
  bundleFile: string | undefined,
  stores: string | undefined,
): string[] | undefined {
  let pems: string[] | undefined;
  if (bundleFile !== undefined) {
    let text: string;
    try {
      text = Deno.readTextFileSync(bundleFile);
    } catch (e) {
      throw new Error(
        `CA bundle file ${bundleFile} cannot be read (${
          (e as Error).message
        }); set --ca-bundle-file / BERTH_CA_BUNDLE_FILE to a readable PEM file`,
      );
    }
    pems = text.match(
      /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g,
    ) ?? undefined;
    if (pems === undefined) {
      throw new Error(
        `CA bundle file ${bundleFile} contains no PEM certificate (no "-----BEGIN CERTIFICATE-----" block); give the CA certificate(s) of the API server in PEM form`,
      );
    }
  }
  const chosen = stores ?? Deno.env.get(CA_STORE_VARIABLE);
  if (pems === undefined && chosen === undefined) return undefined;
  const attempt = (caCerts?: string[]): Error | undefined => {
    try {
      Deno.createHttpClient(caCerts ? { caCerts } : {}).close();
    } catch (e) {
      return e as Error;
    }
  };
  if (stores !== undefined) Deno.env.set(CA_STORE_VARIABLE, stores);
  try {
    const failed = attempt(pems);
    if (failed === undefined) return pems;
    // Whose fault: the root stores (a client without the bundle fails too),
    // or the bundle, one certificate of which is found by trying each.
    const roots = pems === undefined ? failed : attempt();
    if (pems !== undefined && roots === undefined) {
      const errors = pems.map((pem) => attempt([pem]));
      const i = errors.findIndex((e) => e !== undefined);
      throw new Error(
        i < 0
          ? `CA bundle file ${bundleFile} cannot be used (${failed.message})`
          : `CA bundle file ${bundleFile}: certificate ${
            i + 1
          } of ${pems.length} is not a valid certificate (${
            errors[i]!.message
          })`,
      );
    }
    throw new Error(
      `the trust store cannot be loaded (${roots!.message}); ${
        stores === undefined && chosen !== undefined
          ? `check the stores ${CA_STORE_VARIABLE}=${chosen} names`
          : `fix the system's, or set ${CA_STORE_VARIABLE}=mozilla to trust Deno's bundled roots (and the CA bundle) alone`
      }`,
    );
  } finally {
    if (stores !== undefined) Deno.env.delete(CA_STORE_VARIABLE);
  }
}
