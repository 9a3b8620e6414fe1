# syntax=docker/dockerfile:1
#
# The berth-acquire image the Berth webhook injects: one static-entrypoint
# binary that plays `acquire` (init container), `renew` (native sidecar) and,
# copied into the state volume by `acquire`, `check` (the main containers'
# exec liveness probe).
#
#   docker buildx build --platform linux/amd64,linux/arm64 -t IMAGE .
#
# Needs BuildKit (the default builder since Docker 23): the build stage runs
# on the build machine's platform and cross-compiles with `deno compile
# --target`, so an arm64 image builds on an amd64 machine without emulation.

# Builder: pinned by tag to the Deno version the project is tested with. For
# reproducible releases pin the digest as well, e.g.
#   FROM --platform=$BUILDPLATFORM denoland/deno:debian-2.9.6@sha256:<digest> AS build
# (`docker buildx imagetools inspect denoland/deno:debian-2.9.6` prints it).
FROM --platform=$BUILDPLATFORM denoland/deno:debian-2.9.6 AS build
ARG TARGETARCH
WORKDIR /src
COPY deno.json main.ts ./
COPY lib/ lib/
COPY scripts/ scripts/
# The same command as a release build (`deno task compile`), so the
# permission set (-P=berth-acquire from deno.json), the V8 flags, the
# disabled V8 code cache and the type check are the same in the image and in
# the downloads.
RUN set -eu; \
    arch="${TARGETARCH:-$(dpkg --print-architecture)}"; \
    case "$arch" in \
      amd64) target=x86_64-unknown-linux-gnu ;; \
      arm64) target=aarch64-unknown-linux-gnu ;; \
      *) echo "unsupported TARGETARCH=$arch (want amd64 or arm64)" >&2; exit 1 ;; \
    esac; \
    deno task compile --target "$target" --out-dir /out; \
    cp /out/berth-acquire-*-"$target" /out/berth-acquire

# Runtime: distroless "cc" has glibc and libgcc, which the compiled Deno
# binary links against ("static" and scratch have neither, and the binary
# would fail to start with "No such file or directory"). No shell, no
# package manager. Pin the digest here too for reproducible releases.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/berth-acquire /berth-acquire
# Apache-2.0 asks that whoever receives the binary also gets the license.
COPY LICENSE /usr/share/doc/berth-acquire/LICENSE
# Numeric, so the kubelet can verify `runAsNonRoot: true` (it cannot for a
# user name). 65532 is distroless's "nonroot".
USER 65532:65532
# The webhook passes only `args` (["acquire"] or ["renew"]); no CMD, so an
# image run without args prints the usage and exits 1.
ENTRYPOINT ["/berth-acquire"]
