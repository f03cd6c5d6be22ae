{{/* Names and labels. */}}
{{- define "kmirror.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kmirror.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kmirror.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kmirror.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
kmirror.secretDir is where a Secret named by secretMounts or httpToken is
mounted: the contract the config's file paths (and kmirror import-mm2) rely on.
*/}}
{{- define "kmirror.secretDir" -}}
/etc/kmirror/secrets/{{ . }}
{{- end -}}

{{/* kmirror.http is config.http with the chart's settings: the listen address
all interfaces need and the token file. */}}
{{- define "kmirror.http" -}}
{{- $http := deepCopy (.Values.config.http | default dict) -}}
{{- if not $http.listen -}}
{{- $_ := set $http "listen" "0.0.0.0:9644" -}}
{{- end -}}
{{- if .Values.httpToken.secretName -}}
{{- $auth := $http.auth | default dict -}}
{{- if $auth.bearer_token_env -}}
{{- fail (printf "config.http.auth.bearer_token_env (%s) and httpToken.secretName (%s) both give the HTTP token: keep one" $auth.bearer_token_env .Values.httpToken.secretName) -}}
{{- end -}}
{{- $_ := set $auth "bearer_token_file" (printf "%s/%s" (include "kmirror.secretDir" .Values.httpToken.secretName) .Values.httpToken.key) -}}
{{- $_ := set $http "auth" $auth -}}
{{- end -}}
{{- toYaml $http -}}
{{- end -}}

{{/* kmirror.config is the kmirror.yaml the ConfigMap holds. */}}
{{- define "kmirror.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- $_ := set $cfg "http" (include "kmirror.http" . | fromYaml) -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* kmirror.httpScheme is HTTPS when kmirror serves TLS (config.http.tls). */}}
{{- define "kmirror.httpScheme" -}}
{{- if (.Values.config.http | default dict).tls -}}HTTPS{{- else -}}HTTP{{- end -}}
{{- end -}}

{{/*
kmirror.shutdownSeconds is config.shutdown_timeout (a Go duration: "10s",
"1m30s", "500ms"; 10s when unset) in whole seconds, rounded up.
*/}}
{{- define "kmirror.shutdownSeconds" -}}
{{- $d := .Values.config.shutdown_timeout | default "10s" | toString -}}
{{- if not (regexMatch "^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$" $d) -}}
{{- fail (printf "config.shutdown_timeout: %q is not a duration (want a number with a unit, such as \"10s\" or \"1m30s\")" $d) -}}
{{- end -}}
{{- $units := dict "ns" 0.000000001 "us" 0.000001 "µs" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" $d -1 -}}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" . -}}
{{- $unit := trimPrefix $num . -}}
{{- $total = addf $total (mulf (float64 $num) (get $units $unit)) -}}
{{- end -}}
{{- ceil $total | int -}}
{{- end -}}

{{/* kmirror.gracePeriod: terminationGracePeriodSeconds, above shutdown_timeout. */}}
{{- define "kmirror.gracePeriod" -}}
{{- $shutdown := include "kmirror.shutdownSeconds" . | int -}}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds -}}
{{- add $shutdown 20 -}}
{{- else -}}
{{- $grace := .Values.terminationGracePeriodSeconds | int -}}
{{- if le $grace $shutdown -}}
{{- fail (printf "terminationGracePeriodSeconds (%d) must be above config.shutdown_timeout (%ds): Kubernetes kills the pod then, before kmirror has stored its progress" $grace $shutdown) -}}
{{- end -}}
{{- $grace -}}
{{- end -}}
{{- end -}}

{{/* kmirror.secretNames: the Secrets to mount (secretMounts, then the token's), each once. */}}
{{- define "kmirror.secretNames" -}}
{{- $names := list -}}
{{- range .Values.secretMounts -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- if .Values.httpToken.secretName -}}
{{- $names = append $names .Values.httpToken.secretName -}}
{{- end -}}
{{- toJson (uniq $names) -}}
{{- end -}}
