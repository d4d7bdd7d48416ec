{{/* The prefix of every object's name: fullnameOverride or the release name. */}}
{{- define "nibble.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels Helm adds to every object, next to those the kustomize tree has too. */}}
{{- define "nibble.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: nibble
{{- end -}}

{{- define "nibble.controllerLabels" -}}
app.kubernetes.io/name: nibble-controller
app.kubernetes.io/component: controller
{{ include "nibble.helmLabels" . }}
{{- end -}}

{{- define "nibble.controllerSelector" -}}
app.kubernetes.io/name: nibble-controller
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "nibble.image" -}}
{{- printf "%s:%s" .repository (default .appVersion .tag) -}}
{{- end -}}
