package check

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

var chartDir = repoPath("deploy/helm/firstmate")

// kubeVersion is the cluster the chart is rendered for: the oldest its
// Chart.yaml accepts.
const kubeVersion = "v1.30.0"

// valueSets are the values CI renders the chart with.
var valueSets = map[string]map[string]any{
	"defaults": {},
	"three replicas, bundled Redis, ServiceMonitor": {
		"replicaCount":   3,
		"redis":          map[string]any{"bundled": map[string]any{"enabled": true}},
		"serviceMonitor": map[string]any{"enabled": true},
		"persistence":    map[string]any{"accessModes": []any{"ReadWriteMany"}},
		"ingress":        map[string]any{"enabled": true, "className": "nginx", "tlsSecretName": "bot-tls"},
		"config":         map[string]any{"FIRSTMATE_MODEL": "gpt-4.1", "TELEGRAM_WEBHOOK_URL": "https://bot.example.com/telegram/webhook"},
		"secrets":        map[string]any{"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1", "TELEGRAM_BOT_TOKEN": "1:x"},
	},
	"external Redis, no sandbox": {
		"replicaCount": 2,
		"redis":        map[string]any{"url": "redis://:pw@redis.example:6379/0"},
		"persistence":  map[string]any{"existingClaim": "shared-workspaces"},
		"sandbox":      map[string]any{"enabled": false},
	},
	"existing Secret, Localhost seccomp": {
		"existingSecret": "firstmate-env",
		"sandbox": map[string]any{"seccompProfile": map[string]any{"type": "Localhost", "localhostProfile": "firstmate.json"},
			"appArmorProfile": map[string]any{"type": "Localhost", "localhostProfile": "firstmate"}},
	},
}

// render renders the chart as `helm template` does and returns each
// manifest (file, document) that is not empty.
func render(t *testing.T, values map[string]any) (map[string]string, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	caps := common.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	// Helm merges the chart's defaults into the map it is given.
	vals, err := util.ToRenderValues(ch, copyValues(values), common.ReleaseOptions{Name: "fm", Namespace: "bots", Revision: 1, IsInstall: true}, caps)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return nil, err
	}
	docs := map[string]string{}
	for name, body := range files {
		if strings.HasSuffix(name, "NOTES.txt") || strings.TrimSpace(body) == "" {
			continue
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(body, -1) {
			if strings.TrimSpace(doc) != "" {
				docs[fmt.Sprintf("%s#%d", name, i)] = doc
			}
		}
	}
	return docs, nil
}

func copyValues(v map[string]any) map[string]any {
	out := make(map[string]any, len(v))
	for k, x := range v {
		switch x := x.(type) {
		case map[string]any:
			out[k] = copyValues(x)
		case []any:
			out[k] = slices.Clone(x)
		default:
			out[k] = x
		}
	}
	return out
}

// objects is a rendered chart decoded into the Kubernetes API types.
type objects struct {
	deployments  []*appsv1.Deployment
	statefulSets []*appsv1.StatefulSet
	services     []*corev1.Service
	secrets      []*corev1.Secret
	claims       []*corev1.PersistentVolumeClaim
	pdbs         []*policyv1.PodDisruptionBudget
	ingresses    []*networkingv1.Ingress
	monitors     []*monitoringv1.ServiceMonitor
}

// decodeStrict decodes one manifest into its API type, failing on any
// field the type does not have (and on duplicate fields): a typo in the
// chart is an error here, not a silently dropped setting in a cluster.
func (o *objects) decodeStrict(doc string) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
		return err
	}
	var obj any
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		v := &appsv1.Deployment{}
		o.deployments, obj = append(o.deployments, v), v
	case "apps/v1 StatefulSet":
		v := &appsv1.StatefulSet{}
		o.statefulSets, obj = append(o.statefulSets, v), v
	case "v1 Service":
		v := &corev1.Service{}
		o.services, obj = append(o.services, v), v
	case "v1 Secret":
		v := &corev1.Secret{}
		o.secrets, obj = append(o.secrets, v), v
	case "v1 PersistentVolumeClaim":
		v := &corev1.PersistentVolumeClaim{}
		o.claims, obj = append(o.claims, v), v
	case "policy/v1 PodDisruptionBudget":
		v := &policyv1.PodDisruptionBudget{}
		o.pdbs, obj = append(o.pdbs, v), v
	case "networking.k8s.io/v1 Ingress":
		v := &networkingv1.Ingress{}
		o.ingresses, obj = append(o.ingresses, v), v
	case "monitoring.coreos.com/v1 ServiceMonitor":
		v := &monitoringv1.ServiceMonitor{}
		o.monitors, obj = append(o.monitors, v), v
	default:
		return fmt.Errorf("a %s %s, which this test does not know", tm.APIVersion, tm.Kind)
	}
	// As the API server decodes: field names are case-sensitive (encoding/json
	// would take "targetport" for targetPort), unknown and duplicate fields
	// are errors.
	js, err := yaml.YAMLToJSONStrict([]byte(doc))
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(js, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

func renderObjects(t *testing.T, values map[string]any) *objects {
	t.Helper()
	docs, err := render(t, values)
	if err != nil {
		t.Fatal(err)
	}
	o := &objects{}
	for _, name := range slices.Sorted(maps.Keys(docs)) {
		if err := o.decodeStrict(docs[name]); err != nil {
			t.Errorf("%s: %v\n%s", name, err, docs[name])
		}
	}
	return o
}

// TestHelmLint is `helm lint` with each value set: errors and warnings fail.
func TestHelmLint(t *testing.T) {
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	for name, values := range valueSets {
		t.Run(name, func(t *testing.T) {
			res := lint.RunAll(chartDir, copyValues(values), "bots", lint.WithKubeVersion(kv))
			for _, m := range res.Messages {
				if m.Severity >= support.WarningSev {
					t.Error(m)
				} else {
					t.Log(m)
				}
			}
		})
	}
}

// TestHelmRender renders the chart with each value set, decodes every
// object strictly into its API type and checks what the deployment
// depends on.
func TestHelmRender(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	for name, values := range valueSets {
		t.Run(name, func(t *testing.T) {
			o := renderObjects(t, values)
			if t.Failed() {
				return
			}
			checkChart(t, ch, values, o)
		})
	}
}

func get(values map[string]any, path ...string) any {
	var v any = values
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func checkChart(t *testing.T, ch *chart.Chart, values map[string]any, o *objects) {
	if len(o.deployments) != 1 || len(o.services) < 1 {
		t.Fatalf("%d Deployments, %d Services", len(o.deployments), len(o.services))
	}
	d := o.deployments[0]
	replicas := 1
	if r, ok := values["replicaCount"].(int); ok {
		replicas = r
	}
	if d.Spec.Replicas == nil || int(*d.Spec.Replicas) != replicas {
		t.Errorf("replicas %v, want %d", d.Spec.Replicas, replicas)
	}
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	sandbox := get(values, "sandbox", "enabled") != false

	// Non-root, as the image: uid 10001, no privilege escalation, no
	// capabilities, a read-only root.
	psc, csc := pod.SecurityContext, c.SecurityContext
	if psc == nil || csc == nil {
		t.Fatal("no security context")
	}
	if psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || strconv.FormatInt(*psc.RunAsUser, 10) != imageUID {
		t.Errorf("pod runs as %v (non-root %v), want the image's uid %s", psc.RunAsUser, psc.RunAsNonRoot, imageUID)
	}
	if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem ||
		csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) || csc.Privileged != nil {
		t.Errorf("container security context %+v", csc)
	}
	// What the sandbox needs (values.yaml, sandbox), or the runtime's
	// defaults and no shell.
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if sandbox {
		want := get(values, "sandbox", "seccompProfile", "type")
		if want == nil {
			want = "Unconfined"
		}
		_, off := env["FIRSTMATE_SANDBOX"]
		if pod.HostUsers == nil || *pod.HostUsers || csc.ProcMount == nil || *csc.ProcMount != corev1.UnmaskedProcMount ||
			psc.SeccompProfile == nil || string(psc.SeccompProfile.Type) != want || psc.AppArmorProfile == nil || off {
			t.Errorf("sandbox: hostUsers %v, procMount %v, seccomp %+v, AppArmor %+v, FIRSTMATE_SANDBOX %q", pod.HostUsers, csc.ProcMount, psc.SeccompProfile, psc.AppArmorProfile, env["FIRSTMATE_SANDBOX"])
		}
		if psc.SeccompProfile.Type == corev1.SeccompProfileTypeLocalhost && (psc.SeccompProfile.LocalhostProfile == nil || *psc.SeccompProfile.LocalhostProfile == "") {
			t.Error("a Localhost seccomp profile without its file")
		}
	} else if pod.HostUsers != nil || csc.ProcMount != nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || env["FIRSTMATE_SANDBOX"] != "off" {
		t.Errorf("without the sandbox: hostUsers %v, procMount %v, seccomp %+v, FIRSTMATE_SANDBOX %q", pod.HostUsers, csc.ProcMount, psc.SeccompProfile, env["FIRSTMATE_SANDBOX"])
	}
	if env["FIRSTMATE_DATA_DIR"] != "/data" || env["FIRSTMATE_HTTP_ADDR"] != ":8080" {
		t.Errorf("env %v", env)
	}
	if model := get(values, "config", "FIRSTMATE_MODEL"); model != nil && env["FIRSTMATE_MODEL"] != model {
		t.Errorf("FIRSTMATE_MODEL %q, want %q", env["FIRSTMATE_MODEL"], model)
	}

	// Probes: liveness /healthz, readiness /readyz, on the named port.
	var port int32
	for _, p := range c.Ports {
		if p.Name == "http" {
			port = p.ContainerPort
		}
	}
	if port != 8080 {
		t.Errorf("container port http = %d, want 8080 (FIRSTMATE_HTTP_ADDR)", port)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}, {"startup", c.StartupProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.StrVal != "http" {
			t.Errorf("%s probe %+v, want GET %s on http", p.name, p.probe, p.path)
		}
	}
	// Shutdown: the preStop sleep, then firstmate's own (up to 20 s),
	// inside the grace period.
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil || len(c.Lifecycle.PreStop.Exec.Command) != 2 || c.Lifecycle.PreStop.Exec.Command[0] != "sleep" {
		t.Fatalf("preStop %+v, want a sleep", c.Lifecycle)
	}
	sleep, _ := strconv.Atoi(c.Lifecycle.PreStop.Exec.Command[1])
	if g := pod.TerminationGracePeriodSeconds; sleep < 1 || g == nil || int(*g) < sleep+25 {
		t.Errorf("preStop sleep %d s, grace %v s: want the grace to cover the sleep and 20 s of shutdown with room", sleep, g)
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("resources %+v", c.Resources)
	}

	// The Secret the pod reads exists, unless it is the operator's own.
	secret := ""
	for _, ef := range c.EnvFrom {
		if ef.SecretRef != nil {
			secret = ef.SecretRef.Name
		}
	}
	existing, _ := values["existingSecret"].(string)
	switch {
	case existing != "" && secret != existing:
		t.Errorf("the pod reads Secret %q, want existingSecret %q", secret, existing)
	case existing == "" && secret != "" && !slices.ContainsFunc(o.secrets, func(s *corev1.Secret) bool { return s.Name == secret }):
		t.Errorf("the pod reads Secret %q, which the chart does not make", secret)
	case existing == "" && (get(values, "redis", "url") != nil || get(values, "secrets") != nil) && secret == "":
		t.Error("secrets are set but the pod reads no Secret")
	}
	for _, s := range o.secrets {
		if url := get(values, "redis", "url"); url != nil && s.StringData["REDIS_URL"] != url {
			t.Errorf("Secret %s REDIS_URL %q, want %q", s.Name, s.StringData["REDIS_URL"], url)
		}
		for k, v := range s.StringData {
			if v == "" {
				t.Errorf("Secret %s has an empty %s", s.Name, k)
			}
		}
	}

	// The data volume: the chart's claim, the operator's, or an emptyDir.
	for _, v := range pod.Volumes {
		if v.Name != "data" {
			continue
		}
		claim := get(values, "persistence", "existingClaim")
		switch {
		case v.PersistentVolumeClaim == nil:
			t.Errorf("data volume %+v", v)
		case claim != nil && v.PersistentVolumeClaim.ClaimName != claim:
			t.Errorf("data claim %s, want %v", v.PersistentVolumeClaim.ClaimName, claim)
		case claim == nil && (len(o.claims) != 1 || o.claims[0].Name != v.PersistentVolumeClaim.ClaimName):
			t.Errorf("data claim %s is not the chart's", v.PersistentVolumeClaim.ClaimName)
		case replicas > 1 && claim == nil && !slices.Contains(o.claims[0].Spec.AccessModes, corev1.ReadWriteMany):
			t.Errorf("%d replicas share a %v claim", replicas, o.claims[0].Spec.AccessModes)
		}
	}

	// Several replicas: Redis, a rolling update that keeps them all up,
	// a disruption budget. One with the embedded store: Recreate.
	redisURL := env["REDIS_URL"]
	if replicas > 1 {
		if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || len(o.pdbs) != 1 {
			t.Errorf("%d replicas: strategy %s, %d PDBs", replicas, d.Spec.Strategy.Type, len(o.pdbs))
		}
	} else if get(values, "redis") == nil && existing == "" && (d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || redisURL != "") {
		t.Errorf("the embedded store: strategy %s, REDIS_URL %q; want Recreate and none", d.Spec.Strategy.Type, redisURL)
	}
	if get(values, "redis", "bundled", "enabled") == true {
		if len(o.statefulSets) != 1 {
			t.Fatalf("bundled Redis: %d StatefulSets", len(o.statefulSets))
		}
		ss := o.statefulSets[0]
		rc := ss.Spec.Template.Spec.Containers[0]
		if !strings.Contains(strings.Join(rc.Args, " "), "--appendonly yes") || len(ss.Spec.VolumeClaimTemplates) != 1 || len(rc.VolumeMounts) != 1 || rc.VolumeMounts[0].MountPath != "/data" {
			t.Errorf("bundled Redis keeps nothing: args %v, claims %d", rc.Args, len(ss.Spec.VolumeClaimTemplates))
		}
		svc := service(o, ss.Spec.Template.Labels)
		if svc == nil || redisURL != fmt.Sprintf("redis://%s:6379/0", svc.Name) {
			t.Errorf("REDIS_URL %q does not reach the bundled Redis's Service %v", redisURL, svc)
		}
		// Neither firstmate's Service nor its ServiceMonitor picks Redis.
		if own := service(o, d.Spec.Template.Labels); own != nil && subset(own.Spec.Selector, ss.Spec.Template.Labels) {
			t.Errorf("Service %s selects Redis's pods too", own.Name)
		}
		for _, sm := range o.monitors {
			if subset(sm.Spec.Selector.MatchLabels, svc.Labels) {
				t.Errorf("ServiceMonitor %s selects Redis's Service", sm.Name)
			}
		}
	}

	// The Service selects the pods; a ServiceMonitor selects the Service
	// and scrapes its port.
	svc := service(o, d.Spec.Template.Labels)
	if svc == nil {
		t.Fatal("no Service selects firstmate's pods")
	}
	sel, _ := metav1.LabelSelectorAsMap(d.Spec.Selector)
	if !subset(sel, d.Spec.Template.Labels) {
		t.Errorf("selector %v does not match the pod labels %v", sel, d.Spec.Template.Labels)
	}
	if get(values, "serviceMonitor", "enabled") == true {
		if len(o.monitors) != 1 {
			t.Fatalf("%d ServiceMonitors", len(o.monitors))
		}
		sm := o.monitors[0]
		if !subset(sm.Spec.Selector.MatchLabels, svc.Labels) || len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name || sm.Spec.Endpoints[0].Path != "/metrics" {
			t.Errorf("ServiceMonitor %+v does not scrape /metrics of Service %s (labels %v)", sm.Spec, svc.Name, svc.Labels)
		}
	} else if len(o.monitors) != 0 {
		t.Error("a ServiceMonitor without serviceMonitor.enabled")
	}
	for _, ing := range o.ingresses {
		for _, r := range ing.Spec.Rules {
			for _, p := range r.HTTP.Paths {
				if p.Path == "/metrics" || p.Path == "/" || p.Backend.Service == nil || p.Backend.Service.Name != svc.Name {
					t.Errorf("ingress path %s → %+v: only the webhooks, to firstmate's Service", p.Path, p.Backend)
				}
			}
		}
	}
	if app := ch.Metadata.AppVersion; !strings.HasSuffix(c.Image, ":"+app) {
		t.Errorf("image %s, want the appVersion %s as its tag by default", c.Image, app)
	}
}

func subset(a, b map[string]string) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return len(a) > 0
}

// service is the Service whose selector picks pods with these labels.
func service(o *objects, podLabels map[string]string) *corev1.Service {
	for _, s := range o.services {
		if subset(s.Spec.Selector, podLabels) {
			return s
		}
	}
	return nil
}

// TestHelmRefuses: values that cannot work fail to render, saying why.
func TestHelmRefuses(t *testing.T) {
	for _, c := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"replicaCount": 3}, "needs Redis"},
		{map[string]any{"replicaCount": 2, "redis": map[string]any{"url": "redis://r:6379/0"}}, "ReadWriteMany"},
		{map[string]any{"redis": map[string]any{"url": "redis://r:6379/0", "bundled": map[string]any{"enabled": true}}}, "not both"},
		{map[string]any{"terminationGracePeriodSeconds": 10}, "terminationGracePeriodSeconds"},
	} {
		_, err := render(t, c.values)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("values %v: %v, want an error saying %q", c.values, err, c.want)
		}
	}
}

// TestStrictDecodeCatchesTypos: a misspelled field in a rendered manifest
// fails the strict decode (a lenient one would drop it, and the cluster
// would run without the setting).
func TestStrictDecodeCatchesTypos(t *testing.T) {
	docs, err := render(t, valueSets["three replicas, bundled Redis, ServiceMonitor"])
	if err != nil {
		t.Fatal(err)
	}
	typos := map[string][2]string{
		"deployment.yaml":     {"readinessProbe:", "readinesProbe:"},
		"redis.yaml":          {"volumeClaimTemplates:", "volumeClaimTemplate:"},
		"servicemonitor.yaml": {"interval:", "intervall:"},
		"service.yaml":        {"targetPort:", "targetport:"},
	}
	for file, typo := range typos {
		found := false
		for name, doc := range docs {
			if !strings.HasSuffix(strings.Split(name, "#")[0], "/"+file) || !strings.Contains(doc, typo[0]) {
				continue
			}
			found = true
			if err := new(objects).decodeStrict(doc); err != nil {
				t.Fatalf("%s as rendered: %v", name, err)
			}
			err := new(objects).decodeStrict(strings.Replace(doc, typo[0], typo[1], 1))
			if err == nil || !strings.Contains(err.Error(), strings.TrimSuffix(typo[1], ":")) {
				t.Errorf("%s with %s: decoded (%v), want an unknown-field error", name, typo[1], err)
			}
		}
		if !found {
			t.Errorf("no rendered %s has %s", file, typo[0])
		}
	}
	// A field at the top level, too.
	for name, doc := range docs {
		if strings.Contains(name, "deployment.yaml") {
			if err := new(objects).decodeStrict(doc + "\nstatus2: {}\n"); err == nil {
				t.Errorf("%s with an unknown top-level field decoded", name)
			}
		}
	}
}
