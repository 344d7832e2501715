{{/*
The chart name, as the app.kubernetes.io/name label and the ServiceMonitor's
job. Names are cut at 63 characters, the limit of a DNS label.
*/}}
{{- define "kubegate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of the objects: the release name, followed by the chart name
unless it contains it already (release kubegate: kubegate, as deploy/base).
*/}}
{{- define "kubegate.fullname" -}}
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

{{- define "kubegate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object.
*/}}
{{- define "kubegate.labels" -}}
helm.sh/chart: {{ include "kubegate.chart" . }}
{{ include "kubegate.selectorLabels" . }}
app.kubernetes.io/version: {{ include "kubegate.imageTag" . | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kubegate
{{- end }}

{{/*
Selector labels: the Deployment's, the Service's, the PodDisruptionBudget's
and the NetworkPolicy's. deploy/base selects name and component.
*/}}
{{- define "kubegate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubegate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gateway
{{- end }}

{{- define "kubegate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kubegate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kubegate.imageTag" -}}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{/*
The Pod's port name: https when the gateway serves TLS.
*/}}
{{- define "kubegate.portName" -}}
{{- ternary "https" "http" .Values.tls.enabled }}
{{- end }}

{{/*
The container port: the port of config.listen.
*/}}
{{- define "kubegate.containerPort" -}}
{{- splitList ":" .Values.config.listen | last }}
{{- end }}

{{- define "kubegate.servicePort" -}}
{{- if .Values.service.port }}
{{- .Values.service.port }}
{{- else }}
{{- ternary 443 80 .Values.tls.enabled }}
{{- end }}
{{- end }}

{{/*
The Secret holding the serving certificate.
*/}}
{{- define "kubegate.tlsSecretName" -}}
{{- if .Values.tls.certManager.enabled }}
{{- printf "%s-serving-tls" (include "kubegate.fullname" .) }}
{{- else }}
{{- .Values.tls.existingSecret }}
{{- end }}
{{- end }}

{{/*
Where the Secrets are mounted. Each has a directory of its own, beside (not
inside) the ConfigMap's /etc/kubegate, and is mounted whole (no subPath) so
the kubelet's updates reach the files.
*/}}
{{- define "kubegate.tlsDir" -}}/etc/kubegate-tls{{- end }}
{{- define "kubegate.authDir" -}}/etc/kubegate-auth{{- end }}
{{- define "kubegate.webhookDir" -}}/etc/kubegate-webhooks/{{ . }}{{- end }}

{{/*
The gateway's config file: config, with the token file's and the webhooks'
secret paths filled in. The checks here fail the install with a message
naming the value; values.schema.json checks types and names before.
*/}}
{{- define "kubegate.config" -}}
{{- $cfg := deepCopy .Values.config }}
{{- $auth := default dict $cfg.auth }}
{{- if hasKey $cfg "tls" }}
{{- fail "config.tls: serve HTTPS with tls.enabled and tls.existingSecret or tls.certManager, which mount the certificate and set --tls-cert-file and --tls-private-key-file" }}
{{- end }}
{{- if hasKey $cfg "webhooks" }}
{{- fail "config.webhooks: list webhooks in the top-level value webhooks, whose signing secrets come from existing Secrets" }}
{{- end }}
{{- if hasKey $auth "tokenFile" }}
{{- fail "config.auth.tokenFile: set tokenFile.existingSecret (and tokenFile.key); the chart mounts it and sets auth.tokenFile" }}
{{- end }}
{{- $host := trimSuffix (printf ":%s" (include "kubegate.containerPort" .)) .Values.config.listen | trimPrefix "[" | trimSuffix "]" }}
{{- if or (eq $host "localhost") (hasPrefix "127." $host) (eq $host "::1") }}
{{- fail (printf "config.listen: %q accepts only connections from inside the Pod; the Service and the probes could not reach it (use 0.0.0.0:<port>)" .Values.config.listen) }}
{{- end }}
{{- $authn := default "kubernetes" $auth.authn }}
{{- if eq $authn "token-file" }}
{{- if not .Values.tokenFile.existingSecret }}
{{- fail "tokenFile.existingSecret: config.auth.authn token-file needs the Secret holding the token file" }}
{{- end }}
{{- $_ := set $auth "tokenFile" (printf "%s/%s" (include "kubegate.authDir" .) .Values.tokenFile.key) }}
{{- $_ := set $cfg "auth" $auth }}
{{- else if .Values.tokenFile.existingSecret }}
{{- fail (printf "tokenFile.existingSecret: the token file is only used with config.auth.authn token-file, not %q" $authn) }}
{{- end }}
{{- if and (eq (default "rbac" $auth.authz) "rbac") (not (has "namespaces" (dig "cache" "resources" list .Values.config))) }}
{{- fail "config.cache.resources: list namespaces: with config.auth.authz rbac the gateway narrows a reader's cluster-wide request to the namespaces the reader may see, from its namespaces cache (and the ClusterRole follows cache.resources)" }}
{{- end }}
{{- $_ := set $cfg "allowedHosts" (include "kubegate.allowedHosts" . | fromJsonArray) }}
{{- if .Values.webhooks }}
{{- $hooks := list }}
{{- range .Values.webhooks }}
{{- $h := omit . "existingSecret" "existingSecretKey" }}
{{- $_ := set $h "secretFile" (printf "%s/%s" (include "kubegate.webhookDir" .name) (default "secret" .existingSecretKey)) }}
{{- $hooks = append $hooks $h }}
{{- end }}
{{- $_ := set $cfg "webhooks" $hooks }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/*
The host names the gateway is served as, which it accepts in requests'
Host (its check against DNS rebinding; docs/auth.md, "Host check"):
config.allowedHosts, the Service's names, the Ingress's hosts and the
certificate's extra names, as a JSON list. Addresses need no entry (the
gateway requires credentials, and then accepts any address).
*/}}
{{- define "kubegate.allowedHosts" -}}
{{- $fullname := include "kubegate.fullname" . }}
{{- $hosts := list }}
{{- range (default list .Values.config.allowedHosts) }}
{{- $hosts = append $hosts . }}
{{- end }}
{{- range (list $fullname (printf "%s.%s" $fullname .Release.Namespace) (printf "%s.%s.svc" $fullname .Release.Namespace) (printf "%s.%s.svc.cluster.local" $fullname .Release.Namespace)) }}
{{- $hosts = append $hosts . }}
{{- end }}
{{- if .Values.ingress.enabled }}
{{- range .Values.ingress.hosts }}
{{- $hosts = append $hosts .host }}
{{- end }}
{{- end }}
{{- if and .Values.tls.enabled .Values.tls.certManager.enabled }}
{{- range .Values.tls.certManager.extraDnsNames }}
{{- $hosts = append $hosts . }}
{{- end }}
{{- end }}
{{- toJson (uniq $hosts) }}
{{- end }}

{{/*
The resources the gateway lists and watches with its own identity: the
cached ones and those of the webhooks, as a JSON list.
*/}}
{{- define "kubegate.watchedResources" -}}
{{- $names := list }}
{{- range (dig "cache" "resources" list .Values.config) }}
{{- $names = append $names . }}
{{- end }}
{{- range .Values.webhooks }}
{{- range .resources }}
{{- $names = append $names .resource }}
{{- end }}
{{- end }}
{{- toJson $names }}
{{- end }}

{{/*
The ClusterRole's rules for the watched resources: list and watch, one rule
per API group, groups and resources in the order they are first named.

A name maps to its group and resource as kubectl and the gateway read it
(schema.ParseResourceArg): "pods" is the core group's pods,
"deployments.apps" the group apps, "deployments.v1.apps" the same with a
version, "widgets.example.com" a CRD's group. The second part is taken for
a version only when it looks like one (v1, v2beta1) and a group follows.
*/}}
{{- define "kubegate.resourceRules" -}}
{{- $groups := list }}
{{- $byGroup := dict }}
{{- range $name := include "kubegate.watchedResources" . | fromJsonArray }}
{{- $parts := splitList "." (lower $name) }}
{{- $resource := first $parts }}
{{- $rest := rest $parts }}
{{- if and (gt (len $rest) 1) (regexMatch "^v[0-9]+((alpha|beta)[0-9]+)?$" (first $rest)) }}
{{- $rest = rest $rest }}
{{- end }}
{{- $group := join "." $rest }}
{{- if not (hasKey $byGroup $group) }}
{{- $groups = append $groups $group }}
{{- $_ := set $byGroup $group list }}
{{- end }}
{{- if not (has $resource (get $byGroup $group)) }}
{{- $_ := set $byGroup $group (append (get $byGroup $group) $resource) }}
{{- end }}
{{- end }}
{{- range $groups }}
- apiGroups: [{{ . | quote }}]
  resources: {{ get $byGroup . | toJson }}
  verbs: [list, watch]
{{- end }}
{{- end }}
