package main

// The container image (deploy/image) is a bare filesystem with no CA
// bundle, and brokers behind a public CA (hosted Kafka) are reached with
// tls: {} and no ca_file. This package gives crypto/x509 Mozilla's roots,
// compiled in, but only where the system has none: on a host with a
// bundle, and with a ca_file, nothing changes.
import _ "golang.org/x/crypto/x509roots/fallback"
