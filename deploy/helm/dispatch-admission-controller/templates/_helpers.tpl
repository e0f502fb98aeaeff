{{/* The release's full name: the release name when it contains the chart's, else <release>-<chart>. */}}
{{- define "dispatch.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "dispatch.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "dispatch.labels" -}}
{{ include "dispatch.selectorLabels" . }}
app.kubernetes.io/part-of: airflow-provider-dispatch
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "dispatch.serviceAccountName" -}}
{{- default (include "dispatch.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}
