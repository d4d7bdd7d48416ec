# syntax=docker/dockerfile:1
# nibble-engine with the CUDA backend, for linux/arm64 (DGX Spark, GB10) and linux/amd64 (Hopper,
# RTX 50 / RTX PRO), plus the `nibble` CLI for an init container that pulls hf:// models
# (`nibble pull`). Build from the repository root:
#   docker buildx build -f manifests/images/engine.Dockerfile \
#     --platform linux/arm64,linux/amd64 -t REGISTRY/nibble-engine:0.1.0 --push .
# NVIDIA publishes CUDA images for Ubuntu, not Debian: the build uses Ubuntu 24.04's packages of
# the libraries scripts/install-deps.sh installs from Debian 12 (same libraries, newer versions).
# Not built in CI (no Docker engine there); docs/kubernetes.md says what was validated.
ARG CUDA_VERSION=13.0.1

FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu24.04 AS build
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
# sm_90a (H100/H200), sm_120a (RTX 50 / RTX PRO), sm_121a (GB10); narrow it to build faster.
ARG CUDA_ARCHITECTURES="90a;120a;121a"
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_CUDA=ON \
      -DNIBBLE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES}" \
      -DNIBBLE_BUILD_TESTS=OFF -DNIBBLE_BUILD_BENCHMARKS=OFF \
 && cmake --build /build --target nibble-engine nibble
# The shared libraries the binaries need beyond glibc, libstdc++ and CUDA (which the runtime
# image has), copied so the runtime stage needs no -dev package.
RUN mkdir -p /out/bin /out/lib \
 && cp /build/engine/nibble-engine /build/controller/cli/nibble /out/bin/ \
 && ldd /out/bin/* | awk '$3 ~ /^\// {print $3}' | sort -u \
    | grep -vE '/(libc|libm|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas|libcublasLt|ld-linux[^/]*)\.so' \
    | xargs -r cp -L -t /out/lib/

FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu24.04
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 nibble \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin nibble
COPY --from=build /out/bin/ /usr/local/bin/
COPY --from=build /out/lib/ /usr/local/lib/nibble/
RUN echo /usr/local/lib/nibble > /etc/ld.so.conf.d/nibble.conf && ldconfig
# Models are mounted (or pulled by the init container) here; the root filesystem can stay read-only.
VOLUME ["/models"]
USER 65532:65532
EXPOSE 8000
ENTRYPOINT ["nibble-engine"]
CMD ["serve", "--help"]
