// Package deploy holds kmirror's alerting kit: Prometheus alert rules
// (prometheus/kmirror-rules.yml, with promtool unit tests in
// prometheus/kmirror-rules_test.yml) and a Grafana dashboard
// (grafana/kmirror-dashboard.json). It has no Go code; its tests validate
// the kit with promtool (Debian package prometheus; see REQUIREMENTS).
package deploy
