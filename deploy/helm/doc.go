// Package helm holds the tests of kmirror's Helm chart (kmirror/, README.md
// there): a Go module of its own, so that Helm's and Kubernetes' libraries
// stay out of the kmirror binary's module. The tests render the chart with
// Helm's Go SDK as `helm template` does (no cluster), decode every manifest
// strictly into the Kubernetes API types, and run `kmirror validate` on the
// config the chart renders.
package helm
