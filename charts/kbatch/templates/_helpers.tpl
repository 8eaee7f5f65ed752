{{/* Names. */}}
{{- define "kbatch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kbatch.fullname" -}}
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

{{- define "kbatch.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kbatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kbatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kbatch.labels" -}}
helm.sh/chart: {{ include "kbatch.chart" . }}
{{ include "kbatch.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "kbatch.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kbatch.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kbatch.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The scheduler conf, as the file kbatch reads. */}}
{{- define "kbatch.schedulerConf" -}}
{{- toYaml .Values.scheduler.conf -}}
{{- end -}}

{{/* Webhooks: Service, the Secret holding tls.crt/tls.key, the cert-manager Certificate. */}}
{{- define "kbatch.webhookServiceName" -}}
{{- printf "%s-webhook" (include "kbatch.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kbatch.webhookSecretName" -}}
{{- if eq .Values.webhook.certificate.source "secret" -}}
{{- .Values.webhook.certificate.existingSecret -}}
{{- else -}}
{{- printf "%s-webhook-tls" (include "kbatch.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kbatch.webhookCertificateName" -}}
{{- printf "%s-webhook" (include "kbatch.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The DNS names the API server uses to reach the webhook Service. */}}
{{- define "kbatch.webhookDNSNames" -}}
{{- $svc := include "kbatch.webhookServiceName" . -}}
{{- $ns := .Release.Namespace -}}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) | toJson -}}
{{- end -}}

{{/*
The webhook's certificate material as YAML {caCert, tlsCert, tlsKey} (PEM):
for "generate", the Secret a previous release made (so an upgrade keeps it),
else a new CA and a certificate it signs; for "secret", the CA of the
existing Secret or of webhook.certificate.caBundle.
*/}}
{{- define "kbatch.webhookCerts" -}}
{{- $cert := .Values.webhook.certificate -}}
{{- $name := include "kbatch.webhookSecretName" . -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace $name -}}
{{- if eq $cert.source "generate" -}}
{{- $data := dict -}}
{{- if $existing -}}{{- $data = $existing.data | default dict -}}{{- end -}}
{{- if and (index $data "ca.crt") (index $data "tls.crt") (index $data "tls.key") -}}
caCert: {{ index $data "ca.crt" | b64dec | quote }}
tlsCert: {{ index $data "tls.crt" | b64dec | quote }}
tlsKey: {{ index $data "tls.key" | b64dec | quote }}
{{- else -}}
{{- $days := int $cert.validityDays -}}
{{- $ca := genCA (printf "%s-webhook-ca" (include "kbatch.fullname" .)) $days -}}
{{- $svc := include "kbatch.webhookServiceName" . -}}
{{- $dns := include "kbatch.webhookDNSNames" . | fromJsonArray -}}
{{- $signed := genSignedCert (printf "%s.%s.svc" $svc .Release.Namespace) nil $dns $days $ca -}}
caCert: {{ $ca.Cert | quote }}
tlsCert: {{ $signed.Cert | quote }}
tlsKey: {{ $signed.Key | quote }}
{{- end -}}
{{- else if eq $cert.source "secret" -}}
{{- if not $cert.existingSecret -}}
{{- fail "webhook.certificate.source=secret needs webhook.certificate.existingSecret: the name of a Secret with tls.crt and tls.key" -}}
{{- end -}}
{{- if $cert.caBundle -}}
caCert: {{ $cert.caBundle | b64dec | quote }}
{{- else if and $existing (index ($existing.data | default dict) "ca.crt") -}}
caCert: {{ index $existing.data "ca.crt" | b64dec | quote }}
{{- else -}}
{{- fail (printf "webhook.certificate.source=secret: set webhook.certificate.caBundle (the CA of Secret %s, PEM in base64), or give the Secret a ca.crt" $cert.existingSecret) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A webhook's clientConfig; args: root (the top context), path, caBundle (base64 PEM or ""). */}}
{{- define "kbatch.webhookClientConfig" -}}
service:
  name: {{ include "kbatch.webhookServiceName" .root }}
  namespace: {{ .root.Release.Namespace }}
  port: {{ .root.Values.webhook.service.port }}
  path: {{ .path }}
{{- with .caBundle }}
caBundle: {{ . }}
{{- end }}
{{- end -}}

{{/* Fails the render when visibility.port is a port the container already listens on. */}}
{{- define "kbatch.visibilityPortIsFree" -}}
{{- $port := int .Values.visibility.port -}}
{{- $taken := dict "metrics.port" .Values.metrics.port "health.port" .Values.health.port -}}
{{- if .Values.webhook.enabled -}}{{- $_ := set $taken "webhook.port" .Values.webhook.port -}}{{- end -}}
{{- range $name, $other := $taken -}}
{{- if eq $port (int $other) -}}
{{- fail (printf "visibility.port and %s are both %d: kbatch needs a port for each" $name $port) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Where the flight recorder's volume is mounted (record.enabled).
*/}}
{{- define "kbatch.recordPath" -}}
/var/lib/kbatch/recording
{{- end }}

{{/*
The PersistentVolumeClaim the recordings go to: record.volume.claimName, or the
chart's own (newClaim).
*/}}
{{- define "kbatch.recordClaim" -}}
{{- if eq .Values.record.volume.type "existingClaim" -}}
{{- required "record.volume.claimName: the PersistentVolumeClaim to record into (type existingClaim)" .Values.record.volume.claimName }}
{{- else -}}
{{ include "kbatch.fullname" . }}-recording
{{- end }}
{{- end }}
