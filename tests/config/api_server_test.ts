/**
 * The API server URL: what is refused at start-up, and that no message ever
 * shows its user information.
 *
 * @module
 */
import assert from "node:assert/strict";
import { apiServerProblem, redactUrl } from "../../lib/config/api_server.ts";

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
