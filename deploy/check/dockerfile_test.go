package check

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// imageUID is the user the image runs as; the Helm chart and the image
// end-to-end test (cmd/firstmate/image_e2e_test.go) use the same.
const imageUID = "10001"

// dockerfile parses deploy/Dockerfile as BuildKit does, with its linter
// (what `docker build --check` reports) failing the test on any warning.
func dockerfile(t *testing.T) []instructions.Stage {
	t.Helper()
	f, err := os.Open(repoPath("deploy/Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range res.Warnings {
		t.Errorf("Dockerfile: %s", w.Short)
	}
	lint := linter.New(&linter.Config{Warn: func(rule, desc, url, msg string, loc []parser.Range) {
		t.Errorf("Dockerfile line %v: %s: %s (%s)", loc, rule, msg, url)
	}})
	stages, _, err := instructions.Parse(res.AST, lint)
	if err != nil {
		t.Fatal(err)
	}
	return stages
}

// commands returns a stage's instructions of type T.
func commands[T instructions.Command](s instructions.Stage) []T {
	var out []T
	for _, c := range s.Commands {
		if v, ok := c.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func last[T any](t *testing.T, what string, list []T) T {
	t.Helper()
	if len(list) == 0 {
		t.Fatalf("the final stage has no %s", what)
	}
	return list[len(list)-1]
}

// makeTarget is the recipe of a Makefile target, one command a line.
func makeTarget(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(repoPath("Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recipe []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, name+":"):
			in = true
		case in && strings.HasPrefix(line, "\t"):
			recipe = append(recipe, strings.TrimSpace(line))
		case in && strings.TrimSpace(line) != "":
			in = false
		}
	}
	if len(recipe) == 0 {
		t.Fatalf("the Makefile has no %s target", name)
	}
	return recipe
}

var goBuildOutput = regexp.MustCompile(`^go build .*-o (\S+) (\./cmd/\S+)$`)

// TestDockerfile: what the image is, read from deploy/Dockerfile with
// BuildKit's parser, against the Makefile and the repository.
func TestDockerfile(t *testing.T) {
	stages := dockerfile(t)
	if len(stages) != 2 {
		t.Fatalf("%d stages, want a build stage and the runtime stage", len(stages))
	}
	build, final := stages[0], stages[1]
	if build.Name != "build" || !strings.HasPrefix(build.BaseName, "golang:1.26") {
		t.Errorf("build stage %q FROM %q, want build FROM golang:1.26", build.Name, build.BaseName)
	}
	if !strings.HasPrefix(final.BaseName, "debian:") || !strings.HasSuffix(final.BaseName, "-slim") {
		t.Errorf("runtime stage FROM %q, want a slim Debian", final.BaseName)
	}

	// The build is the Makefile's: `make build`, whose outputs the
	// runtime stage copies.
	var made bool
	for _, r := range commands[*instructions.RunCommand](build) {
		made = made || regexp.MustCompile(`(^|[;&|\s])make build($|[;&|\s])`).MatchString(strings.Join(r.CmdLine, " "))
	}
	if !made {
		t.Error("the build stage does not run `make build`")
	}
	workdir := last(t, "WORKDIR", commands[*instructions.WorkdirCommand](build)).Path
	var built []string
	for _, line := range makeTarget(t, "build") {
		m := goBuildOutput.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("Makefile build line %q is not `go build -o OUT ./cmd/X`", line)
		}
		built = append(built, filepath.Join(workdir, m[1]))
	}
	var copied []string
	for _, c := range commands[*instructions.CopyCommand](final) {
		if c.From == build.Name {
			copied = append(copied, c.SourcePaths...)
			if c.DestPath != "/usr/local/bin/" {
				t.Errorf("binaries copied to %s, want /usr/local/bin/ (firstmate-sandbox beside firstmate)", c.DestPath)
			}
		}
	}
	slices.Sort(built)
	slices.Sort(copied)
	if !slices.Equal(built, copied) {
		t.Errorf("the image gets %v from the build stage, the Makefile builds %v", copied, built)
	}
	if want := []string{"/src/bin/firstmate", "/src/bin/firstmate-sandbox"}; !slices.Equal(copied, want) {
		t.Errorf("the image has %v, want %v", copied, want)
	}

	// Every file COPY takes from the context exists and is not ignored.
	ign := dockerignore(t)
	for _, s := range stages {
		for _, c := range commands[*instructions.CopyCommand](s) {
			if c.From != "" {
				continue
			}
			for _, src := range c.SourcePaths {
				if _, err := os.Stat(repoPath(src)); err != nil {
					t.Errorf("COPY %s: %v", src, err)
				}
				if src != "." && ignored(t, ign, src) {
					t.Errorf("COPY %s: Dockerfile.dockerignore leaves it out of the context", src)
				}
			}
		}
	}

	user := last(t, "USER", commands[*instructions.UserCommand](final)).User
	if uid, _, _ := strings.Cut(user, ":"); uid != imageUID {
		t.Errorf("USER %q, want %s (non-root, the uid the chart and tests use)", user, imageUID)
	}
	env := map[string]string{}
	for _, e := range commands[*instructions.EnvCommand](final) {
		for _, kv := range e.Env {
			env[kv.Key] = kv.Value
		}
	}
	vols := last(t, "VOLUME", commands[*instructions.VolumeCommand](final)).Volumes
	if !slices.Equal(vols, []string{"/data"}) || env["FIRSTMATE_DATA_DIR"] != "/data" {
		t.Errorf("VOLUME %v, FIRSTMATE_DATA_DIR %q: want the data directory to be the volume /data", vols, env["FIRSTMATE_DATA_DIR"])
	}
	port := strings.TrimPrefix(env["FIRSTMATE_HTTP_ADDR"], ":")
	if exp := last(t, "EXPOSE", commands[*instructions.ExposeCommand](final)).Ports; env["FIRSTMATE_HTTP_ADDR"] != ":"+port || !slices.Equal(exp, []string{port}) {
		t.Errorf("EXPOSE %v, FIRSTMATE_HTTP_ADDR %q: want the listener on every interface at the exposed port", exp, env["FIRSTMATE_HTTP_ADDR"])
	}
	hc := last(t, "HEALTHCHECK", commands[*instructions.HealthCheckCommand](final)).Health
	if hc == nil || len(hc.Test) < 2 || hc.Test[0] != "CMD-SHELL" || !strings.Contains(hc.Test[1], "/healthz") || !strings.Contains(hc.Test[1], "FIRSTMATE_HTTP_ADDR") {
		t.Errorf("HEALTHCHECK %+v, want a check of /healthz on FIRSTMATE_HTTP_ADDR's port", hc)
	}
	if ep := last(t, "ENTRYPOINT", commands[*instructions.EntrypointCommand](final)); ep.PrependShell || !slices.Equal(ep.CmdLine, []string{"firstmate"}) {
		t.Errorf("ENTRYPOINT %v, want [\"firstmate\"] (exec form: SIGTERM reaches firstmate)", ep.CmdLine)
	}
	// The tools a shell user expects; the sandbox shows commands this /usr.
	var install string
	for _, r := range commands[*instructions.RunCommand](final) {
		install += strings.Join(r.CmdLine, " ")
	}
	for _, pkg := range []string{"ca-certificates", "curl", "git", "jq", "procps", "python3"} {
		if !regexp.MustCompile(`\s` + regexp.QuoteMeta(pkg) + `\s`).MatchString(install) {
			t.Errorf("the image does not install %s", pkg)
		}
	}
}

func dockerignore(t *testing.T) *patternmatcher.PatternMatcher {
	t.Helper()
	f, err := os.Open(repoPath("deploy/Dockerfile.dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	return pm
}

func ignored(t *testing.T, pm *patternmatcher.PatternMatcher, path string) bool {
	t.Helper()
	ok, err := pm.MatchesOrParentMatches(filepath.ToSlash(filepath.Clean(path)))
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestDockerignoreKeepsTheBuild: `make build` needs go.mod, go.sum, the
// Makefile and every file of every package the two commands import from
// this module; none of them may be left out of the build context.
func TestDockerignoreKeepsTheBuild(t *testing.T) {
	pm := dockerignore(t)
	for _, f := range []string{"go.mod", "go.sum", "Makefile"} {
		if ignored(t, pm, f) {
			t.Errorf("%s is left out of the build context", f)
		}
	}
	root, err := filepath.Abs(repoPath("."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "-f", `{{if not .Standard}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}`,
		"./cmd/firstmate", "./cmd/firstmate-sandbox")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	n := 0
	for _, f := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, f)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue // another module's
		}
		n++
		if ignored(t, pm, rel) {
			t.Errorf("%s is needed by the build but left out of the context", rel)
		}
	}
	if n == 0 {
		t.Fatalf("go list found none of this module's files:\n%s", out)
	}
}
