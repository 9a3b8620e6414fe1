/**
 * What the client trusts and how it explains a refused certificate: the
 * system's trust store with the CA bundle added to it (the bundle never
 * replaces it), the bundle read and checked once at start-up, and a look at
 * the certificate a server presents, so that "expired" and "not yet valid"
 * are told apart from "untrusted" (Deno's `node:https` reports all three as
 * one code). `node:tls` is loaded only for that look, after a handshake
 * failed.
 *
 * @module
 */
import type { Target } from "./wire.ts";

/**
 * The system trust store files Go's `crypto/x509` (the reference helper's)
 * reads on Linux, in its order.
 */
export const SYSTEM_BUNDLE_FILES: readonly string[] = [
  "/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine, distroless
  "/etc/pki/tls/certs/ca-bundle.crt", // Fedora, RHEL 6
  "/etc/ssl/ca-bundle.pem", // openSUSE
  "/etc/pki/tls/cacert.pem", // OpenELEC
  "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
  "/etc/ssl/cert.pem", // Alpine
];

/** The variable Deno builds its root certificates from, once per process, at the first TLS use. */
export const CA_STORE_VARIABLE = "DENO_TLS_CA_STORE";

/** The stores used when the system's can be found: it first, then Deno's bundled Mozilla roots (what Deno trusts by default). */
export const SYSTEM_CA_STORES = "system,mozilla";

/** What {@linkcode chooseCaStores} decided. */
export interface CaStoreChoice {
  /** The value to give {@linkcode CA_STORE_VARIABLE}; undefined: leave it as it is. */
  stores?: string;
  /** Why the system's store is not used although the environment names one. */
  warning?: string;
}

/**
 * Which root stores the client trusts, before any CA bundle is added. Deno
 * trusts only its bundled Mozilla roots unless {@linkcode CA_STORE_VARIABLE}
 * says otherwise; the reference helper trusts the system's (a company CA
 * added to the node's or the image's store included). So: a value the user
 * set is kept; otherwise the system's store and Mozilla's roots, when the
 * system's file can be read: `SSL_CERT_FILE` when set, else the first of
 * {@linkcode SYSTEM_BUNDLE_FILES} that is there. Deno reads only such a
 * file (not `SSL_CERT_DIR` or the hashed directories Go also reads), and it
 * refuses every TLS connection when the system store it was told to use
 * cannot be loaded, so a file that cannot be read is not named (Mozilla's
 * roots alone), with a warning.
 *
 * @param env Reads an environment variable.
 * @param look Whether a path is a file (or a directory) this process can
 * read, is there but cannot be read, or is not there.
 * @returns What to set, and what to warn about.
 */
export function chooseCaStores(
  env: (name: string) => string | undefined,
  look: (path: string, kind: "file" | "dir") => PathState,
): CaStoreChoice {
  if (env(CA_STORE_VARIABLE) !== undefined) return {};
  const file = env("SSL_CERT_FILE");
  if (file !== undefined && file !== "") {
    if (look(file, "file") === "readable") return { stores: SYSTEM_CA_STORES };
    return {
      warning:
        `SSL_CERT_FILE names ${file}, which cannot be read as a file; the system trust store is not used (Deno's bundled Mozilla roots and the CA bundle are): fix or unset SSL_CERT_FILE`,
    };
  }
  // The first system file there, as Deno takes the first it finds.
  for (const f of SYSTEM_BUNDLE_FILES) {
    const state = look(f, "file");
    if (state === "absent") continue;
    if (state === "readable") return { stores: SYSTEM_CA_STORES };
    return {
      warning:
        `the system trust store ${f} cannot be read by this user, so it is not used (Deno's bundled Mozilla roots and the CA bundle are): make it readable, or set SSL_CERT_FILE to a readable bundle`,
    };
  }
  return {};
}

/** What {@linkcode lookPath} found at a path. */
export type PathState = "readable" | "unreadable" | "absent";

/**
 * Whether `path` is a regular file this process can open for reading (or,
 * `kind` `"dir"`, a directory it can list), is there but cannot be read, or
 * is not there.
 *
 * @param path The path.
 * @param kind What it must be.
 * @returns What was found.
 */
export function lookPath(path: string, kind: "file" | "dir"): PathState {
  try {
    if (kind === "dir") {
      for (const _ of Deno.readDirSync(path)) break;
      return "readable";
    }
    using f = Deno.openSync(path, { read: true });
    return f.statSync().isFile ? "readable" : "unreadable";
  } catch (e) {
    return e instanceof Deno.errors.NotFound ? "absent" : "unreadable";
  }
}

/**
 * The PEM certificate blocks of the bundle at `path`, not yet parsed.
 *
 * @throws {Error} A configuration error naming the file: unreadable, or no
 * certificate in it.
 */
function readPemBlocks(path: string): string[] {
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (e) {
    throw new Error(
      `CA bundle file ${path} cannot be read (${
        (e as Error).message
      }); set --ca-bundle-file / BERTH_CA_BUNDLE_FILE to a readable PEM file`,
    );
  }
  const pems = text.match(
    /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g,
  ) ?? [];
  if (pems.length === 0) {
    throw new Error(
      `CA bundle file ${path} contains no PEM certificate (no "-----BEGIN CERTIFICATE-----" block); give the CA certificate(s) of the API server in PEM form`,
    );
  }
  return pems;
}

/** The error for a bundle of which one certificate does not parse, found one by one. */
function badCertificate(path: string, pems: string[], cause: unknown): Error {
  for (const [i, pem] of pems.entries()) {
    try {
      Deno.createHttpClient({ caCerts: [pem] }).close();
    } catch (e) {
      return new Error(
        `CA bundle file ${path}: certificate ${
          i + 1
        } of ${pems.length} is not a valid certificate (${
          (e as Error).message
        })`,
      );
    }
  }
  return new Error(
    `CA bundle file ${path} cannot be used (${(cause as Error).message})`,
  );
}

/**
 * The client's trust, set up once per process before its first TLS use: the
 * root stores `stores` names ({@linkcode chooseCaStores}) and the CA bundle
 * at `bundleFile`, parsed the way every transport will use them. One HTTP
 * client is built and closed to do both, which also makes Deno build its
 * root certificates now: it reads {@linkcode CA_STORE_VARIABLE} once, at the
 * first TLS use, and keeps what it built, so the variable is removed again
 * and the processes this one starts (`run`'s command) get the environment
 * they were given.
 *
 * @param bundleFile The `--ca-bundle-file` value, if any.
 * @param stores The value for {@linkcode CA_STORE_VARIABLE}, if any.
 * @returns The bundle's PEM blocks, in file order; undefined without one.
 * @throws {Error} A configuration error: the bundle cannot be read, holds no
 * certificate or one that does not parse (by its number), or the stores
 * cannot be loaded (naming the variable and what to do).
 */
export function readTrust(
  bundleFile: string | undefined,
  stores: string | undefined,
): string[] | undefined {
  const pems = bundleFile === undefined ? undefined : readPemBlocks(bundleFile);
  const chosen = stores ?? Deno.env.get(CA_STORE_VARIABLE);
  if (pems === undefined && chosen === undefined) return undefined;
  if (stores !== undefined) Deno.env.set(CA_STORE_VARIABLE, stores);
  try {
    Deno.createHttpClient(pems === undefined ? {} : { caCerts: pems }).close();
  } catch (e) {
    // Whose fault: the root stores (a client without the bundle fails too),
    // or the bundle.
    let rootsError: unknown;
    try {
      if (pems !== undefined) Deno.createHttpClient({}).close();
      else rootsError = e;
    } catch (e2) {
      rootsError = e2;
    }
    if (rootsError === undefined) throw badCertificate(bundleFile!, pems!, e);
    throw new Error(
      `the trust store cannot be loaded (${(rootsError as Error).message}); ${
        stores === undefined && chosen !== undefined
          ? `check the stores ${CA_STORE_VARIABLE}=${chosen} names`
          : `fix the system's, or set ${CA_STORE_VARIABLE}=mozilla to trust Deno's bundled roots (and the CA bundle) alone`
      }`,
    );
  } finally {
    if (stores !== undefined) Deno.env.delete(CA_STORE_VARIABLE);
  }
  return pems;
}

/** The validity period of a certificate, in epoch milliseconds. */
export interface Validity {
  /** Not valid before this. */
  notBefore: number;
  /** Not valid after this. */
  notAfter: number;
}

/**
 * The validity period of the certificate `target` presents, found by a
 * second handshake that verifies nothing and sends nothing; undefined when
 * that fails too or `signal` ends it. Only called after a handshake was
 * refused, to word the error.
 */
export async function presentedValidity(
  target: Target,
  serverName: string | undefined,
  signal: AbortSignal,
): Promise<Validity | undefined> {
  if (signal.aborted) return undefined;
  const tls = await import("node:tls");
  return await new Promise((resolve) => {
    const name = serverName ?? target.hostname;
    const socket = tls.connect({
      host: target.hostname,
      port: target.port,
      // SNI takes names only, never an address.
      servername: /^[\d.]+$|:/.test(name) ? undefined : name,
      rejectUnauthorized: false,
    });
    const done = (v: Validity | undefined) => {
      signal.removeEventListener("abort", onAbort);
      socket.destroy();
      resolve(v);
    };
    const onAbort = () => done(undefined);
    signal.addEventListener("abort", onAbort, { once: true });
    socket.on("error", () => done(undefined));
    socket.on("secureConnect", () => {
      const cert = socket.getPeerCertificate();
      const notBefore = Date.parse(cert?.valid_from ?? "");
      const notAfter = Date.parse(cert?.valid_to ?? "");
      done(
        Number.isFinite(notBefore) && Number.isFinite(notAfter)
          ? { notBefore, notAfter }
          : undefined,
      );
    });
  });
}
