/**
 * What the client trusts and how it explains a refused certificate: the CA
 * bundle, read and checked once at start-up, and a look at the certificate
 * a server presents, so that "expired" and "not yet valid" are told apart
 * from "untrusted" (Deno's `node:https` reports all three as one code).
 * `node:tls` is loaded only for that look, after a handshake failed.
 *
 * @module
 */
import type { Target } from "./wire.ts";

/**
 * The PEM certificates in `path`, each checked to parse.
 *
 * @param path The `--ca-bundle-file` value.
 * @returns The PEM blocks, in file order.
 * @throws {Error} A configuration error naming the file: unreadable, no
 * certificate in it, or a certificate that does not parse (by its number).
 */
export function readCaBundle(path: string): string[] {
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
  pems.forEach((pem, i) => {
    try {
      // Parses the certificate the way fetch will; nothing is connected.
      Deno.createHttpClient({ caCerts: [pem] }).close();
    } catch (e) {
      throw new Error(
        `CA bundle file ${path}: certificate ${
          i + 1
        } of ${pems.length} is not a valid certificate (${
          (e as Error).message
        })`,
      );
    }
  });
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
