{{/* The name of the chart's objects. */}}
{{- define "firstmate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "firstmate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "firstmate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "firstmate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "firstmate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "firstmate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The Secret the pods read their secret environment from, if any. */}}
{{- define "firstmate.secretName" -}}
{{- if .Values.existingSecret }}
{{- .Values.existingSecret }}
{{- else if or .Values.redis.url (include "firstmate.hasSecrets" .) }}
{{- include "firstmate.fullname" . }}
{{- end }}
{{- end }}

{{/* Non-empty when some value of .Values.secrets is set. */}}
{{- define "firstmate.hasSecrets" -}}
{{- range $k, $v := .Values.secrets }}{{ if $v }}yes{{ end }}{{ end }}
{{- end }}

{{/* Non-empty when the replicas share a Redis. */}}
{{- define "firstmate.hasRedis" -}}
{{- if or .Values.redis.url .Values.redis.bundled.enabled .Values.existingSecret }}yes{{ end }}
{{- end }}

{{- define "firstmate.redisName" -}}
{{- printf "%s-redis" (include "firstmate.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* What the chart cannot render sensibly. */}}
{{- define "firstmate.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not (include "firstmate.hasRedis" .)) }}
{{- fail "replicaCount > 1 needs Redis: set redis.url, redis.bundled.enabled, or REDIS_URL in existingSecret (the embedded store serves one process)" }}
{{- end }}
{{- if and .Values.redis.url .Values.redis.bundled.enabled }}
{{- fail "set redis.url or redis.bundled.enabled, not both" }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) .Values.persistence.enabled (not .Values.persistence.existingClaim) (not (has "ReadWriteMany" .Values.persistence.accessModes)) }}
{{- fail "replicaCount > 1 needs the data volume on every replica: persistence.accessModes [ReadWriteMany] (or an existingClaim that is)" }}
{{- end }}
{{- if lt (int .Values.terminationGracePeriodSeconds) (add (int .Values.preStopSleepSeconds) 25) }}
{{- fail "terminationGracePeriodSeconds must cover preStopSleepSeconds plus firstmate's shutdown (up to 20 s) with room: at least preStopSleepSeconds + 25" }}
{{- end }}
{{- end }}

{{/* The bundled Redis's labels: its own name, so that neither
firstmate's Service nor the ServiceMonitor selects it. */}}
{{- define "firstmate.redisSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-redis" (include "firstmate.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: redis
{{- end }}

{{- define "firstmate.redisLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "firstmate.redisSelectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: {{ include "firstmate.name" . }}
{{- end }}
