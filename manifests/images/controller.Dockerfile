# syntax=docker/dockerfile:1
# nibble-controller (reconciler, OpenAI router, autoscaler): no CUDA, Debian 12 packages as
# scripts/install-deps.sh installs them, a slim non-root runtime. Multi-arch as it stands:
#   docker buildx build -f manifests/images/controller.Dockerfile \
#     --platform linux/arm64,linux/amd64 -t REGISTRY/nibble-controller:0.1.0 --push .
# Not built in CI (no Docker engine there); docs/kubernetes.md says what was validated.
FROM debian:12 AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      cmake ninja-build g++ pkg-config \
      libcpp-httplib-dev libssl-dev zlib1g-dev libbrotli-dev libyaml-cpp-dev \
      nlohmann-json3-dev libspdlog-dev libfmt-dev libpcre2-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY cmake cmake
COPY metrics metrics
COPY kernels kernels
COPY engine engine
COPY controller controller
COPY tools tools
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_CUDA=OFF \
      -DNIBBLE_BUILD_TESTS=OFF -DNIBBLE_BUILD_BENCHMARKS=OFF \
 && cmake --build /build --target nibble-controller nibble

FROM debian:12-slim
# The runtime halves of the build's libraries (ldd of nibble-controller).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates libcpp-httplib0.11 libyaml-cpp0.7 libspdlog1.10 libfmt9 libssl3 \
      libbrotli1 zlib1g \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/controller/daemon/nibble-controller /build/controller/cli/nibble /usr/local/bin/
USER 65532:65532
EXPOSE 8000
ENTRYPOINT ["nibble-controller"]
