/**
 * The request sequences the peer tier sends to the upstream API server and to
 * the development server alike: valid, malformed, unauthorised, conflicting,
 * expired, released and cleaned-up ones. Each sequence works on its own lease
 * (`prod/s<NN>`), so fencing tokens start at 1 on both servers and can be
 * compared exactly.
 *
 * In a body, `{{t}}` stands for the fencing token of the last successful
 * acquire of the sequence on the server at hand, `{{t+1}}` for a wrong one.
 *
 * @module
 */
import { OTHER, TEAM } from "./peers.ts";

/** One HTTP request of a sequence. */
export interface Call {
  /** Default `POST`. */
  method?: string;
  /** The RPC, for the default path `/v1alpha1/namespaces/prod/leases/<lease>/<op>`. */
  op?: "acquire" | "renew" | "release";
  /** A full request target instead; `{{lease}}` is the sequence's lease name. */
  path?: string;
  /** The body; an object is sent as `JSON.stringify` of it. */
  body?: string | Record<string, unknown>;
  /** `Authorization` header value; default `Bearer team-token`; `null` for none. */
  auth?: string | null;
  /** Further header lines (sent after `Authorization`). */
  headers?: [string, string][];
  /** Send no `Host` header. */
  noHost?: boolean;
}

/** Something that happens between calls. */
export type Pause =
  /** Wait until every lease the sequence took with a 1 s TTL has expired. */
  | { expire: true }
  /**
   * The clean-up sweep of both servers: the real server's rows are backdated
   * past the 5 minute grace and its sweep is awaited; the development server
   * (started in-process for such a sequence) has its clock moved past the
   * grace and its sweep run.
   */
  | { cleanup: true };

/** A sequence: calls and pauses, sent in order to both servers. */
export interface Sequence {
  /** Short description, the test step's name. */
  name: string;
  /** valid, malformed, unauthorised, conflicting, expired, released, cleaned up. */
  group: string;
  /** What is sent. */
  steps: (Call | Pause)[];
  /**
   * A documented difference this sequence may show (see docs/peer-tests.md):
   * a difference here is reported, not failed.
   */
  allowed?: string;
  /** Header names not compared for this sequence. */
  ignoreHeaders?: string[];
}

const T = (holder = "team/a", ttlSeconds = 30) => ({ holder, ttlSeconds });
const acq = (holder = "team/a", ttlSeconds = 30, more: Partial<Call> = {}) =>
  ({ op: "acquire", body: T(holder, ttlSeconds), ...more }) as Call;
const ren = (
  holder = "team/a",
  token = "{{t}}",
  ttlSeconds = 30,
  more: Partial<Call> = {},
) =>
  ({
    op: "renew",
    body: `{"holder":${
      JSON.stringify(holder)
    },"fencingToken":${token},"ttlSeconds":${ttlSeconds}}`,
    ...more,
  }) as Call;
const rel = (holder = "team/a", token = "{{t}}", more: Partial<Call> = {}) =>
  ({
    op: "release",
    body: `{"holder":${JSON.stringify(holder)},"fencingToken":${token}}`,
    ...more,
  }) as Call;
const raw = (op: Call["op"], body: string, more: Partial<Call> = {}) =>
  ({ op, body, ...more }) as Call;
const EXPIRE: Pause = { expire: true };
const CLEANUP: Pause = { cleanup: true };
const BEARER_OTHER = `Bearer ${OTHER.token}`;
const LEASE = "/v1alpha1/namespaces/prod/leases/{{lease}}";

const valid: Sequence[] = [
  { name: "acquire a free lease", steps: [acq()] },
  { name: "acquire twice as the same holder", steps: [acq(), acq()] },
  { name: "acquire then renew", steps: [acq(), ren()] },
  { name: "acquire, renew, release", steps: [acq(), ren(), rel()] },
  {
    name: "renew with a longer TTL",
    steps: [acq(), ren("team/a", "{{t}}", 90)],
  },
  { name: "release a lease never taken", steps: [rel("team/a", "1")] },
  { name: "renew a lease never taken", steps: [ren("team/a", "1")] },
  { name: "the bare tenant as holder", steps: [acq("team"), ren("team")] },
  { name: "the largest TTL", steps: [acq("team/a", 2147483647)] },
  { name: "a holder with non-ASCII characters", steps: [acq("team/é☃ ü")] },
  { name: "a holder of 253 bytes", steps: [acq("team/" + "x".repeat(248))] },
  {
    name: "a name with dots",
    steps: [{
      ...acq(),
      path: "/v1alpha1/namespaces/prod/leases/{{lease}}.v1.db/acquire",
    }],
  },
  {
    name: "a namespace of 63 characters",
    steps: [{
      ...acq(),
      path: `/v1alpha1/namespaces/${"n".repeat(63)}/leases/{{lease}}/acquire`,
    }],
  },
  {
    name: "field names in another case",
    steps: [raw("acquire", '{"HOLDER":"team/a","TtlSeconds":30}')],
  },
  {
    name: "a duplicate key: the last one wins",
    steps: [
      raw("acquire", '{"holder":"team/x","holder":"team/a","ttlSeconds":30}'),
    ],
  },
  {
    name: "a text/plain content type",
    steps: [acq("team/a", 30, { headers: [["Content-Type", "text/plain"]] })],
  },
  {
    name: "GET /healthz",
    steps: [{ method: "GET", path: "/healthz", auth: null }],
    ignoreHeaders: ["x-content-type-options"],
  },
  {
    name: "GET /readyz",
    steps: [{ method: "GET", path: "/readyz", auth: null }],
    ignoreHeaders: ["x-content-type-options"],
  },
  {
    name: "an inbound X-Request-Id is echoed",
    steps: [acq("team/a", 30, { headers: [["X-Request-Id", "peer-req_01"]] })],
  },
  {
    name: "a traceparent's trace id becomes the request id",
    steps: [acq("team/a", 30, {
      headers: [[
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      ]],
    })],
  },
  {
    name: "a traceparent of version ff",
    steps: [acq("team/a", 30, {
      headers: [[
        "traceparent",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      ]],
    })],
  },
  {
    name: "an X-Request-Id with unsafe characters is replaced",
    steps: [acq("team/a", 30, { headers: [["X-Request-Id", "bad id!"]] })],
  },
  {
    name: "two X-Request-Id headers",
    steps: [acq("team/a", 30, {
      headers: [["X-Request-Id", "first-id"], ["X-Request-Id", "second-id"]],
    })],
    allowed:
      "repeated headers arrive joined inside Deno.serve (docs/dev-server.md, differences: two X-Request-Id headers)",
  },
].map((s) => ({ ...s, group: "valid" }));

const malformed: Sequence[] = [
  { name: "an empty body", steps: [raw("acquire", "")] },
  { name: "a body that is not JSON", steps: [raw("acquire", "hello")] },
  {
    name: "an unknown field",
    steps: [raw("acquire", '{"holder":"team/a","ttlSeconds":30,"x":1}')],
  },
  { name: "a null body", steps: [raw("acquire", "null")] },
  {
    name: "an array body",
    steps: [raw("acquire", '[{"holder":"team/a","ttlSeconds":30}]')],
  },
  {
    name: "a float TTL",
    steps: [raw("acquire", '{"holder":"team/a","ttlSeconds":1.5}')],
  },
  {
    name: "a string TTL",
    steps: [raw("acquire", '{"holder":"team/a","ttlSeconds":"30"}')],
  },
  { name: "a zero TTL", steps: [acq("team/a", 0)] },
  { name: "a negative TTL", steps: [acq("team/a", -1)] },
  {
    name: "a TTL over int32",
    steps: [raw("acquire", '{"holder":"team/a","ttlSeconds":2147483648}')],
  },
  {
    name: "a string fencing token",
    steps: [
      acq(),
      raw("renew", '{"holder":"team/a","fencingToken":"1","ttlSeconds":30}'),
    ],
  },
  { name: "renew with token 0", steps: [acq(), ren("team/a", "0")] },
  {
    name: "renew without a token",
    steps: [acq(), raw("renew", '{"holder":"team/a","ttlSeconds":30}')],
  },
  {
    name: "trailing data after the object",
    steps: [raw("acquire", '{"holder":"team/a","ttlSeconds":30} x')],
  },
  {
    name: "two objects",
    steps: [raw("acquire", '{"holder":"team/a","ttlSeconds":30}{}')],
  },
  {
    name: "a body over 4096 bytes",
    steps: [
      raw("acquire", `{"holder":"team/a","ttlSeconds":30}${" ".repeat(4096)}`),
    ],
  },
  { name: "an empty holder", steps: [acq("")] },
  { name: "a holder of 254 bytes", steps: [acq("team/" + "x".repeat(249))] },
  {
    name: "release without a holder",
    steps: [raw("release", '{"fencingToken":1}')],
  },
  {
    name: "a namespace with capitals",
    steps: [{
      ...acq(),
      path: "/v1alpha1/namespaces/Prod/leases/{{lease}}/acquire",
    }],
  },
  {
    name: "a namespace with a dot",
    steps: [{
      ...acq(),
      path: "/v1alpha1/namespaces/a.b/leases/{{lease}}/acquire",
    }],
  },
  {
    name: "a name with an underscore",
    steps: [{
      ...acq(),
      path: "/v1alpha1/namespaces/prod/leases/Web_1/acquire",
    }],
  },
  {
    name: "a key over 253 characters",
    steps: [{
      ...acq(),
      path: `/v1alpha1/namespaces/${"n".repeat(63)}/leases/${
        "m".repeat(200)
      }/acquire`,
    }],
  },
  {
    name: "a path with //",
    steps: [{
      ...acq(),
      path: "/v1alpha1//namespaces/prod/leases/{{lease}}/acquire",
    }],
  },
  {
    name: "a path with /./",
    steps: [{
      ...acq(),
      path: "/v1alpha1/./namespaces/prod/leases/{{lease}}/acquire",
    }],
  },
  {
    name: "a path with /../",
    steps: [{
      ...acq(),
      path: "/v1alpha1/x/../namespaces/prod/leases/{{lease}}/acquire",
    }],
  },
  {
    name: "GET on a lease RPC",
    steps: [{ method: "GET", path: `${LEASE}/acquire` }],
  },
  { name: "PUT on a lease RPC", steps: [{ ...acq(), method: "PUT" }] },
  {
    name: "POST /healthz",
    steps: [{ method: "POST", path: "/healthz", body: "", auth: null }],
  },
  { name: "an unknown path", steps: [{ ...acq(), path: `${LEASE}/steal` }] },
  {
    name: "no Host header",
    steps: [{ ...acq(), noHost: true }],
    allowed: "HTTP edge inside Deno.serve (issue 23 row 11)",
  },
  {
    name: "OPTIONS *",
    steps: [{ method: "OPTIONS", path: "*", auth: null }],
  },
].map((s) => ({ ...s, group: "malformed" }));

const unauthorised: Sequence[] = [
  {
    name: "no Authorization header",
    steps: [acq("team/a", 30, { auth: null })],
  },
  {
    name: "a Basic Authorization",
    steps: [acq("team/a", 30, { auth: "Basic dGVhbTp4" })],
  },
  {
    name: "a lower-case bearer",
    steps: [acq("team/a", 30, { auth: `bearer ${TEAM.token}` })],
  },
  {
    name: "a wrong token",
    steps: [acq("team/a", 30, { auth: "Bearer wrong-token" })],
  },
  {
    name: "Bearer without a token",
    steps: [acq("team/a", 30, { auth: "Bearer " })],
  },
  {
    name: "spaces around the token",
    steps: [acq("team/a", 30, { auth: `Bearer   ${TEAM.token}  ` })],
  },
  {
    name: "two Authorization headers, the first valid",
    steps: [
      acq("team/a", 30, { headers: [["Authorization", "Bearer wrong-token"]] }),
    ],
    allowed:
      "repeated headers arrive joined inside Deno.serve (docs/dev-server.md, differences: two Authorization headers)",
  },
  {
    name: "two Authorization headers, the first wrong",
    steps: [acq("team/a", 30, {
      auth: "Bearer wrong-token",
      headers: [["Authorization", `Bearer ${TEAM.token}`]],
    })],
  },
  { name: "a holder of another tenant", steps: [acq("other/a")] },
  {
    name: "a holder that only starts with the tenant",
    steps: [acq("teamx/a")],
  },
  {
    name: "another tenant's key for this tenant's holder",
    steps: [acq("team/a", 30, { auth: BEARER_OTHER })],
  },
  {
    name: "no key and a malformed body",
    steps: [raw("acquire", "hello", { auth: null })],
  },
  {
    name: "no key and an oversized body",
    steps: [raw("acquire", " ".repeat(5000), { auth: null })],
  },
  {
    name: "a forbidden holder and an invalid namespace",
    steps: [{
      ...acq("other/a"),
      path: "/v1alpha1/namespaces/Prod/leases/{{lease}}/acquire",
    }],
  },
].map((s) => ({ ...s, group: "unauthorised" }));

const conflicting: Sequence[] = [
  {
    name: "acquire a lease another holder has",
    steps: [acq("team/a"), acq("team/b")],
  },
  {
    name: "renew a lease another holder has",
    steps: [acq("team/a"), ren("team/b")],
  },
  {
    name: "renew with a wrong token",
    steps: [acq(), ren("team/a", "{{t+1}}")],
  },
  {
    name: "release a lease another holder has",
    steps: [acq("team/a"), rel("team/b")],
  },
  {
    name: "release with a wrong token",
    steps: [acq(), rel("team/a", "{{t+1}}")],
  },
  { name: "release with token 0", steps: [acq(), rel("team/a", "0")] },
  { name: "renew with a negative token", steps: [acq(), ren("team/a", "-1")] },
  {
    name: "hand over after a release",
    steps: [acq("team/a"), rel("team/a"), acq("team/b"), ren("team/b")],
  },
].map((s) => ({ ...s, group: "conflicting" }));

const expired: Sequence[] = [
  {
    name: "another holder takes an expired lease",
    steps: [acq("team/a", 1), EXPIRE, acq("team/b")],
  },
  { name: "renew an expired lease", steps: [acq("team/a", 1), EXPIRE, ren()] },
  {
    name: "release an expired lease with the right token",
    steps: [acq("team/a", 1), EXPIRE, rel()],
  },
  {
    name: "release an expired lease as another holder",
    steps: [acq("team/a", 1), EXPIRE, rel("team/b")],
  },
  {
    name: "release an expired lease with a wrong token",
    steps: [acq("team/a", 1), EXPIRE, rel("team/a", "{{t+1}}")],
  },
  {
    name: "the same holder acquires its expired lease again",
    steps: [acq("team/a", 1), EXPIRE, acq("team/a")],
  },
  {
    name: "renew an expired lease, then acquire it",
    steps: [acq("team/a", 1), EXPIRE, ren(), acq(), ren()],
  },
  {
    name: "an expired lease as seen by a contender",
    steps: [acq("team/a", 1), EXPIRE, ren("team/b", "1")],
  },
].map((s) => ({ ...s, group: "expired" }));

const released: Sequence[] = [
  { name: "renew after a release", steps: [acq(), rel(), ren("team/a", "1")] },
  {
    name: "another holder acquires after a release",
    steps: [acq(), rel(), acq("team/b")],
  },
  {
    name: "another holder releases a released lease",
    steps: [acq(), rel(), rel("team/b", "7")],
  },
  {
    name: "another holder renews a released lease",
    steps: [acq(), rel(), ren("team/b", "1")],
  },
  {
    name: "tokens keep rising over releases",
    steps: [acq(), rel(), acq(), rel(), acq()],
  },
  {
    name: "the same holder acquires after its release",
    steps: [acq(), rel(), acq()],
  },
].map((s) => ({ ...s, group: "released" }));

const cleanedUp: Sequence[] = [
  {
    name: "renew a cleaned-up lease",
    steps: [acq("team/a", 1), CLEANUP, ren("team/a", "1")],
  },
  {
    name: "release a cleaned-up lease as another holder",
    steps: [acq("team/a", 1), CLEANUP, rel("team/b", "1")],
  },
  {
    name: "another holder acquires a cleaned-up lease",
    steps: [acq("team/a", 1), CLEANUP, acq("team/b")],
  },
  {
    name: "release a cleaned-up lease with its token",
    steps: [acq("team/a", 1), CLEANUP, rel("team/a", "1")],
  },
  {
    name: "the same holder acquires a cleaned-up lease",
    steps: [acq("team/a", 1), CLEANUP, acq("team/a")],
  },
  {
    name: "a contender renews a cleaned-up lease",
    steps: [acq("team/a", 1), CLEANUP, ren("team/b", "1")],
  },
].map((s) => ({ ...s, group: "cleaned up" }));

/** Every sequence, in a stable order. */
export const CORPUS: readonly Sequence[] = [
  ...valid,
  ...malformed,
  ...unauthorised,
  ...conflicting,
  ...expired,
  ...released,
  ...cleanedUp,
];
