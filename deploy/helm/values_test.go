package helm

// The value sets the tests render. Each is a values file as a user would
// write it (helm install -f); the config parts are valid kmirror configs
// once the Secrets they name are mounted (validate_test.go checks that).

// minimalValues is the least a release needs: the clusters and one mirror.
const minimalValues = `
config:
  clusters:
    east: {bootstrap_servers: ["kafka-east:9092"]}
    west: {bootstrap_servers: ["kafka-west:9092"]}
  mirrors:
    - {name: east-to-west, source: east, target: west}
`

// saslTLSValues: clusters with TLS (a CA, and a client certificate on
// west) and SCRAM, their files in Secrets mounted by secretMounts.
const saslTLSValues = `
secretMounts:
  - name: east-scram
  - name: kafka-ca
  - name: west-client
config:
  clusters:
    east:
      bootstrap_servers: ["kafka-east:9093"]
      tls: {ca_file: /etc/kmirror/secrets/kafka-ca/ca.crt}
      sasl:
        mechanism: SCRAM-SHA-512
        username: kmirror
        password_file: /etc/kmirror/secrets/east-scram/password
    west:
      bootstrap_servers: ["kafka-west:9093"]
      tls:
        ca_file: /etc/kmirror/secrets/kafka-ca/ca.crt
        cert_file: /etc/kmirror/secrets/west-client/tls.crt
        key_file: /etc/kmirror/secrets/west-client/tls.key
  mirrors:
    - name: east-to-west
      source: east
      target: west
      replication_factor: 3
      rate_limit: 50000000
      producer: {compression: zstd}
  shutdown_timeout: 1m30s
  log: {format: json}
`

// tokenValues: the HTTP API behind a bearer token from a Secret, /metrics
// open to Prometheus without it.
const tokenValues = minimalValues + `
  http:
    auth: {metrics: false}
httpToken:
  secretName: kmirror-http
`

// monitoringValues: a token that /metrics needs too, HTTPS, and the
// ServiceMonitor, PrometheusRule and dashboard.
const monitoringValues = minimalValues + `
  http:
    tls:
      cert_file: /etc/kmirror/secrets/kmirror-https/tls.crt
      key_file: /etc/kmirror/secrets/kmirror-https/tls.key
secretMounts:
  - name: kmirror-https
httpToken:
  secretName: kmirror-http
  key: api-token
serviceMonitor:
  enabled: true
  labels: {release: prometheus}
  tlsConfig: {insecureSkipVerify: true}
prometheusRule:
  enabled: true
  labels: {release: prometheus}
grafanaDashboard:
  enabled: true
  annotations: {grafana_folder: Kafka}
`

// replicasValues: three workers sharing the mirror.
const replicasValues = minimalValues + `
replicaCount: 3
resources:
  requests: {cpu: 500m, memory: 512Mi}
  limits: {memory: 1Gi}
`

// pluginsValues renders a plugin filter whose binary comes from a volume at
// /plugins; sha is the binary's sha256.
func pluginsValues(sha string) string {
	return `
plugins:
  volume:
    persistentVolumeClaim: {claimName: kmirror-plugins, readOnly: true}
config:
  clusters:
    east: {bootstrap_servers: ["kafka-east:9092"]}
    west: {bootstrap_servers: ["kafka-west:9092"]}
  plugins:
    catalog: {path: /plugins/catalog-filter, sha256: "` + sha + `", config: {catalog: /plugins/catalog.json}}
  mirrors:
    - name: east-to-west
      source: east
      target: west
      filters: [{plugin: catalog}]
`
}

// valueSets are every value set but the plugins one (which needs a
// built plugin for its sha256), by name.
var valueSets = []struct{ name, values string }{
	{"minimal", minimalValues},
	{"sasl-tls", saslTLSValues},
	{"token", tokenValues},
	{"monitoring", monitoringValues},
	{"replicas", replicasValues},
	{"plugins", pluginsValues("0000000000000000000000000000000000000000000000000000000000000000")},
}
