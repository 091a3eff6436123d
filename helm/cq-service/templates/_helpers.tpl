{{/* The chart's name (nameOverride). */}}
{{- define "cq-service.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name: <release>-<chart> unless the release already contains it. */}}
{{- define "cq-service.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "cq-service.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "cq-service.labels" -}}
helm.sh/chart: {{ include "cq-service.chart" . }}
{{ include "cq-service.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: cq-service
{{- end -}}

{{/* Labels that select the worker's pods. */}}
{{- define "cq-service.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cq-service.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: worker
{{- end -}}

{{- define "cq-service.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "cq-service.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "cq-service.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret with the token and the catalog URL: an existing one or the chart's. */}}
{{- define "cq-service.secretName" -}}
{{- default (include "cq-service.fullname" .) .Values.auth.existingSecret -}}
{{- end -}}

{{/* Whether the catalog is external (PostgreSQL): a URL given, or one in an existing Secret. */}}
{{- define "cq-service.externalCatalog" -}}
{{- if or .Values.catalog.url .Values.auth.existingSecret -}}true{{- end -}}
{{- end -}}

{{- define "cq-service.workerName" -}}
{{- default (include "cq-service.fullname" .) .Values.worker.name -}}
{{- end -}}

{{/* Where the worker reads its pipeline files. */}}
{{- define "cq-service.pipelinesDir" -}}
{{- if eq .Values.pipelines.source "git" -}}
{{- $sub := trimAll "/" (default "" .Values.pipelines.git.path) -}}
{{- if or (eq $sub "") (eq $sub ".") -}}/git/current{{- else -}}{{ printf "/git/current/%s" $sub }}{{- end -}}
{{- else -}}
/pipelines
{{- end -}}
{{- end -}}

{{/* The worker's configuration file (settings of docs/service.md, by file key). */}}
{{- define "cq-service.config" -}}
{{- $own := dict
  "pipelines" (include "cq-service.pipelinesDir" .)
  "host" "0.0.0.0"
  "port" .Values.worker.port
  "name" (include "cq-service.workerName" .)
  "snapshots" "/data/snapshots"
  "spark_checkpoints" "/data/spark" -}}
{{- if not (include "cq-service.externalCatalog" .) -}}
{{- $_ := set $own "catalog" "sqlite:////data/catalog.db" -}}
{{- end -}}
{{- if .Values.kafka.bootstrap -}}
{{- $_ := set $own "kafka_bootstrap" .Values.kafka.bootstrap -}}
{{- end -}}
{{- toYaml (merge $own .Values.worker.settings) -}}
{{- end -}}

{{/* The catalog URL (CQ_CATALOG, overriding the file's SQLite default) and, with `token`, the
API token as environment variables, from the Secret. With `catalogRequired` the catalog URL must
be there (the migration Job). */}}
{{- define "cq-service.secretEnv" -}}
{{- $ctx := .ctx -}}
- name: CQ_CATALOG
  valueFrom:
    secretKeyRef:
      name: {{ include "cq-service.secretName" $ctx }}
      key: {{ $ctx.Values.auth.catalogUrlKey }}
      optional: {{ not .catalogRequired }}
{{- if .token }}
- name: CQ_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "cq-service.secretName" $ctx }}
      key: {{ $ctx.Values.auth.tokenKey }}
      optional: true
{{- end }}
{{- end -}}

{{/* Whether the migration hook Job is rendered. */}}
{{- define "cq-service.migrationJob" -}}
{{- if and .Values.migrations.enabled (include "cq-service.externalCatalog" .) -}}true{{- end -}}
{{- end -}}

{{/* Whether the chart renders its own Secret (no existing one, something to keep in it). */}}
{{- define "cq-service.ownSecret" -}}
{{- if and (not .Values.auth.existingSecret) (or .Values.auth.token .Values.catalog.url) -}}true{{- end -}}
{{- end -}}
