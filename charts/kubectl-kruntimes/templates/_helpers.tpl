{{/* Labels Helm adds to what it renders from deploy/ (kept beside the objects' own labels). */}}
{{- define "kruntimes.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "kruntimes.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "kruntimes.runtimedImage" -}}
{{ .Values.runtimedImage | default (include "kruntimes.image" .) }}
{{- end -}}

{{/*
The objects of one deploy/ file (files/NAME), as dicts: the documents of the file, comments and
empty documents left out. Use: include "kruntimes.objects" (list $ "files/x.yaml") | fromYamlArray
The scheduler's account is named by its username where a policy trusts it (the submitter
policies let it delegate): in the release's namespace, not deploy/'s kubectl-kruntimes.
*/}}
{{- define "kruntimes.objects" -}}
{{- $root := index . 0 -}}
{{- $objects := list -}}
{{- $text := $root.Files.Get (index . 1) | replace "system:serviceaccount:kubectl-kruntimes:" (printf "system:serviceaccount:%s:" $root.Release.Namespace) -}}
{{- range $doc := splitList "\n---\n" $text -}}
{{- $obj := fromYaml $doc -}}
{{- if and $obj (hasKey $obj "kind") -}}
{{- $objects = append $objects $obj -}}
{{- end -}}
{{- end -}}
{{- toYaml $objects -}}
{{- end -}}

{{/*
The apiVersion the cluster serves MutatingAdmissionPolicy at (admissionregistration.k8s.io/v1
from Kubernetes 1.36, v1beta1 where 1.34 or 1.35 enables it), or empty where it serves neither:
the submitter's mutating policy is then left out (kubectl kruntimes install decides the same by
discovery). `helm template` answers from --api-versions.
*/}}
{{- define "kruntimes.mutatingPolicyVersion" -}}
{{- if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy" -}}
admissionregistration.k8s.io/v1
{{- else if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1beta1/MutatingAdmissionPolicy" -}}
admissionregistration.k8s.io/v1beta1
{{- end -}}
{{- end -}}
