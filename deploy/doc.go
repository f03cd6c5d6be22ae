// Package deploy holds kmirror's deploy kit (README.md): a hardened systemd
// unit (systemd/kmirror.service), sample configs (examples/), Prometheus
// alert rules (prometheus/kmirror-rules.yml, with promtool unit tests in
// prometheus/kmirror-rules_test.yml), a Grafana dashboard
// (grafana/kmirror-dashboard.json) and a Helm chart (helm/kmirror, tested in
// its own Go module, deploy/helm). It has no Go code; its tests check the
// kit: the examples with `kmirror validate`, the unit with systemd-analyze,
// the rules with promtool (Debian package prometheus; see REQUIREMENTS).
package deploy
