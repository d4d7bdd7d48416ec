# Third-party libraries, all from Debian 12 packages (scripts/install-deps.sh installs them).
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(spdlog REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(OpenSSL REQUIRED)
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)

# One name per dependency so that CMakeLists below do not care how each was found.
add_library(nibble::httplib INTERFACE IMPORTED)
target_link_libraries(nibble::httplib INTERFACE PkgConfig::HTTPLIB OpenSSL::SSL OpenSSL::Crypto Threads::Threads)
add_library(nibble::pcre2 ALIAS PkgConfig::PCRE2)

# prometheus-cpp: the core library only (metric types, registry, text serializer); its civetweb
# exposer (pull) and push gateway are not used: /metrics is served by the project's HTTP layer.
find_package(prometheus-cpp REQUIRED COMPONENTS core)  # Debian 12: 1.0.1, no version file
add_library(nibble::prometheus ALIAS prometheus-cpp::core)

if(TARGET yaml-cpp::yaml-cpp)
  add_library(nibble::yaml ALIAS yaml-cpp::yaml-cpp)
else()
  add_library(nibble::yaml INTERFACE IMPORTED)
  target_link_libraries(nibble::yaml INTERFACE yaml-cpp)
endif()

if(NIBBLE_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
if(NIBBLE_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()
