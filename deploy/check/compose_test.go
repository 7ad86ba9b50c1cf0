package check

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

var composeDir = repoPath("deploy")

// loadCompose loads a compose file as `docker compose` does: checked
// against the Compose specification's schema (unknown keys are errors),
// relative paths resolved against its directory. The .env file is the
// operator's, so it is not read.
func loadCompose(t *testing.T, content []byte) (*types.Project, error) {
	t.Helper()
	dir, err := filepath.Abs(composeDir)
	if err != nil {
		t.Fatal(err)
	}
	return loader.LoadWithContext(t.Context(), types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(dir, "compose.yaml"), Content: content}},
		Environment: types.Mapping{},
	}, func(o *loader.Options) {
		o.ResolvePaths = true
		o.SkipResolveEnvironment = true
	})
}

func composeFile(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(composeDir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCompose: deploy/compose.yaml runs firstmate from deploy/Dockerfile
// with Redis that keeps its data, health checks, the secrets from .env
// and the sandbox's security options.
func TestCompose(t *testing.T) {
	p, err := loadCompose(t, composeFile(t))
	if err != nil {
		t.Fatal(err)
	}
	if names := p.ServiceNames(); !slices.Equal(names, []string{"firstmate", "redis"}) {
		t.Fatalf("services %v, want firstmate and redis", names)
	}
	fm, redis := p.Services["firstmate"], p.Services["redis"]

	if fm.Build == nil || filepath.Clean(fm.Build.Context) != filepath.Clean(mustAbs(t, repoPath("."))) {
		t.Errorf("build %+v, want the repository's root as the context", fm.Build)
	} else if _, err := os.Stat(filepath.Join(fm.Build.Context, fm.Build.Dockerfile)); err != nil || filepath.ToSlash(fm.Build.Dockerfile) != "deploy/Dockerfile" {
		t.Errorf("dockerfile %q: %v", fm.Build.Dockerfile, err)
	}

	// Secrets from .env beside the file; an example ships.
	if len(fm.EnvFiles) != 1 || filepath.Base(fm.EnvFiles[0].Path) != ".env" || filepath.Dir(fm.EnvFiles[0].Path) != mustAbs(t, composeDir) {
		t.Errorf("env_file %+v, want deploy/.env", fm.EnvFiles)
	}
	checkEnvExample(t)

	// The store is the Redis service, which firstmate waits for.
	if url := fm.Environment["REDIS_URL"]; url == nil || !strings.HasPrefix(*url, "redis://redis:6379") {
		t.Errorf("REDIS_URL %v, want the redis service", url)
	}
	if dep, ok := fm.DependsOn["redis"]; !ok || dep.Condition != types.ServiceConditionHealthy {
		t.Errorf("depends_on %+v, want redis healthy first", fm.DependsOn)
	}
	if addr := fm.Environment["FIRSTMATE_HTTP_ADDR"]; addr == nil || *addr != ":8080" {
		t.Errorf("FIRSTMATE_HTTP_ADDR %v, want :8080 (the health check and the port mapping reach it)", addr)
	}

	// Health checks on /healthz and Redis's ping.
	if hc := fm.HealthCheck; hc == nil || !strings.Contains(strings.Join(hc.Test, " "), "http://127.0.0.1:8080/healthz") {
		t.Errorf("firstmate healthcheck %+v, want /healthz", hc)
	}
	if hc := redis.HealthCheck; hc == nil || !strings.Contains(strings.Join(hc.Test, " "), "ping") {
		t.Errorf("redis healthcheck %+v", hc)
	}

	// Persistence: named volumes for /data on both, Redis's AOF on.
	for _, c := range []struct {
		svc    types.ServiceConfig
		target string
	}{{fm, "/data"}, {redis, "/data"}} {
		i := slices.IndexFunc(c.svc.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == c.target })
		if i < 0 || c.svc.Volumes[i].Type != types.VolumeTypeVolume {
			t.Errorf("%s: no named volume at %s: %+v", c.svc.Name, c.target, c.svc.Volumes)
			continue
		}
		if _, ok := p.Volumes[c.svc.Volumes[i].Source]; !ok {
			t.Errorf("%s: volume %s is not declared", c.svc.Name, c.svc.Volumes[i].Source)
		}
	}
	if cmd := strings.Join(redis.Command, " "); !strings.Contains(cmd, "--appendonly yes") {
		t.Errorf("redis command %q, want --appendonly yes", cmd)
	}

	// The sandbox: the seccomp profile this repository ships (compose
	// reads it relative to the compose file), no AppArmor mount ban, an
	// unmasked /proc.
	opts := fm.SecurityOpt
	for _, want := range []string{"apparmor=unconfined", "systempaths=unconfined"} {
		if !slices.Contains(opts, want) {
			t.Errorf("security_opt %v lacks %s", opts, want)
		}
	}
	seccomp := ""
	for _, o := range opts {
		if v, ok := strings.CutPrefix(o, "seccomp="); ok {
			seccomp = v
		}
	}
	if seccomp == "" || seccomp == "unconfined" || filepath.Clean(filepath.Join(composeDir, seccomp)) != filepath.Clean(seccompFile) {
		t.Errorf("security_opt seccomp=%q, want deploy/docker/seccomp.json", seccomp)
	} else if _, err := os.Stat(filepath.Join(composeDir, seccomp)); err != nil {
		t.Error(err)
	}
	// Shutdown hands over within 20 s; Docker's default stop timeout is 10 s.
	if g := fm.StopGracePeriod; g == nil || time.Duration(*g) < 25*time.Second {
		t.Errorf("stop_grace_period %v, want at least 25s", g)
	}
}

// TestComposeRejectsTypos: the loader checks the Compose schema, so a
// misspelled key fails here instead of being ignored by an older Docker.
func TestComposeRejectsTypos(t *testing.T) {
	bad := strings.Replace(string(composeFile(t)), "    healthcheck:", "    healthchek:", 1)
	if _, err := loadCompose(t, []byte(bad)); err == nil || !strings.Contains(err.Error(), "healthchek") {
		t.Fatalf("a misspelled key loaded: %v", err)
	}
}

// checkEnvExample: every variable deploy/.env.example names is one
// README.md documents.
func checkEnvExample(t *testing.T) {
	t.Helper()
	readme, err := os.ReadFile(repoPath("README.md"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(composeDir, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "#"))
		name, _, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsAny(name, " \t") || name == "" || strings.ToUpper(name) != name {
			continue
		}
		n++
		if !strings.Contains(string(readme), "`"+name+"`") && !strings.Contains(string(readme), "`"+name+"=") {
			t.Errorf(".env.example sets %s, which README.md does not document", name)
		}
	}
	if n == 0 {
		t.Error(".env.example sets nothing")
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
