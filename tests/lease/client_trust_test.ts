import assert from "node:assert/strict";
import {
  CA_STORE_VARIABLE,
  chooseCaStores,
  lookPath,
  type PathState,
  readTrust,
  SYSTEM_BUNDLE_FILES,
  SYSTEM_CA_STORES,
} from "../../lib/lease/client.ts";
import { makeTestPki, opensslMissing } from "../support/tls.ts";

const envOf = (vars: Record<string, string>) => (name: string) => vars[name];
/** Readable: the files given; the rest absent. */
const only = (...paths: string[]) => (p: string): PathState =>
  paths.includes(p) ? "readable" : "absent";

Deno.test("chooseCaStores: the system's store with Mozilla's roots when the system's can be read, the user's choice kept", () => {
  // A distroless or Debian image: the first of Go's files.
  assert.deepEqual(
    chooseCaStores(envOf({}), only("/etc/ssl/certs/ca-certificates.crt")),
    { stores: SYSTEM_CA_STORES },
  );
  // RHEL's file.
  assert.deepEqual(
    chooseCaStores(envOf({}), only("/etc/pki/tls/certs/ca-bundle.crt")),
    { stores: SYSTEM_CA_STORES },
  );
  // SSL_CERT_FILE and SSL_CERT_DIR name the system's store, as for Go.
  assert.deepEqual(
    chooseCaStores(
      envOf({ SSL_CERT_FILE: "/certs/corp.pem" }),
      only("/certs/corp.pem"),
    ),
    { stores: SYSTEM_CA_STORES },
  );
  // Deno does not read SSL_CERT_DIR: alone it names no store Deno can load.
  assert.deepEqual(
    chooseCaStores(envOf({ SSL_CERT_DIR: "/certs" }), only()),
    {},
  );
  // Whatever the user set stays, even a store Deno does not know.
  assert.deepEqual(
    chooseCaStores(
      envOf({ [CA_STORE_VARIABLE]: "mozilla", SSL_CERT_FILE: "/x" }),
      only("/x", ...SYSTEM_BUNDLE_FILES),
    ),
    {},
  );
});

Deno.test("chooseCaStores: no system store named where none can be read, and a warning for an unreadable SSL_CERT_FILE", () => {
  // A scratch image: Deno would refuse every connection if told to load it.
  assert.deepEqual(chooseCaStores(envOf({}), only()), {});
  // Only hashed certificates in a directory: Deno would not read them.
  assert.deepEqual(
    chooseCaStores(
      envOf({}),
      (p) => p === "/etc/ssl/certs" ? "unreadable" : "absent",
    ),
    {},
  );
  const c = chooseCaStores(
    envOf({ SSL_CERT_FILE: "/nope.pem" }),
    only(...SYSTEM_BUNDLE_FILES),
  );
  assert.equal(c.stores, undefined);
  assert.match(
    c.warning ?? "",
    /SSL_CERT_FILE names \/nope\.pem, which cannot be read/,
  );
  assert.match(c.warning ?? "", /fix or unset SSL_CERT_FILE/);
  // A system file that is there but cannot be read: Deno would find it and
  // refuse every connection, so the system store is not named.
  const locked = chooseCaStores(
    envOf({}),
    (p) => p === SYSTEM_BUNDLE_FILES[0] ? "unreadable" : "readable",
  );
  // A later file that cannot be read does not matter: the first one there is used.
  assert.deepEqual(
    chooseCaStores(
      envOf({}),
      (p) => p === SYSTEM_BUNDLE_FILES[0] ? "readable" : "unreadable",
    ),
    { stores: SYSTEM_CA_STORES },
  );
  assert.equal(locked.stores, undefined);
  assert.match(
    locked.warning ?? "",
    /ca-certificates\.crt cannot be read by this user, so it is not used/,
  );
});

Deno.test("lookPath: a regular file; there but not a readable file; absent", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/a.pem`, "x");
    assert.equal(lookPath(`${dir}/a.pem`), "readable");
    assert.equal(lookPath(dir), "unreadable");
    assert.equal(lookPath(`${dir}/missing.pem`), "absent");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("readTrust builds the roots and leaves no variable for the processes it starts", () => {
  const before = Deno.env.get(CA_STORE_VARIABLE);
  if (before !== undefined) {
    console.log(`skipped: ${CA_STORE_VARIABLE} is set in this environment`);
    return;
  }
  assert.equal(readTrust(undefined, SYSTEM_CA_STORES), undefined);
  assert.equal(Deno.env.get(CA_STORE_VARIABLE), undefined);
});

Deno.test({
  name:
    "readTrust: a bundle is parsed as the transports will use it; a bad certificate is named by its number",
  ignore: opensslMissing() !== undefined,
  async fn() {
    await using pki = await makeTestPki({ names: ["127.0.0.1"] });
    const good = await Deno.readTextFile(pki.caCert);
    assert.deepEqual(readTrust(pki.caCert, undefined), [good.trim()]);
    const bundle = `${pki.dir}/mixed.pem`;
    await Deno.writeTextFile(
      bundle,
      `${good}\n-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n`,
    );
    assert.throws(
      () => readTrust(bundle, undefined),
      /CA bundle file .*mixed\.pem: certificate 2 of 2 is not a valid certificate/,
    );
    assert.throws(
      () => readTrust(`${pki.dir}/missing.pem`, undefined),
      /cannot be read/,
    );
  },
});
