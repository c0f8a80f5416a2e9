# The emseepea server as a container image: the binary only, run as a
# non-root user, no shell or package manager at run time. Sources are not
# baked in: `emseepea pull` (the same binary, e.g. as a Kubernetes init
# container, deploy/kubernetes/deployment.yaml) fetches them by digest into
# the sources directory, checking their signatures.
#
#   podman build -t emseepea .      (or docker / buildah bud)
#
# The release profile's fat LTO takes ~20 minutes on two cores.

FROM docker.io/library/rust:1.97-bookworm AS build
WORKDIR /src
COPY . .
# The host only: the guests and their toolchains are not needed to serve.
RUN cargo build --release --locked -p emseepea --bin emseepea \
 && install -D -m 0755 target/release/emseepea /out/emseepea

# glibc, libgcc and CA certificates (for https registries, JWKS, guests'
# outbound HTTP); no shell. The binary links nothing else (SQLite is bundled,
# TLS is rustls/ring).
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/emseepea /usr/local/bin/emseepea
# distroless's "nonroot" user (65532); Kubernetes may override it
# (runAsUser), as deploy/kubernetes does.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/emseepea"]
CMD ["serve", "--config", "/config/emseepea.toml"]
