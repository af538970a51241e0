// Command helm-render renders a Helm chart the way `helm template` does, for the test suite of a
// machine that has no helm binary. It uses the same parts Helm is built from, as Debian packages them:
// Go's text/template, sprig's TxtFuncMap (without env/expandenv, as Helm removes them) and yaml.v2/v3.
//
// Helm semantics reproduced here (helm.sh/helm/v3/pkg/engine and pkg/chartutil):
//   - values: every -f file deep-merged in order, then coalesced over the chart's values.yaml (a null in
//     the user values deletes the default); numbers are float64, as Helm's JSON-based YAML reader makes them;
//   - .Values, .Release (Name, Namespace, Service, IsInstall, IsUpgrade, Revision), .Chart (Chart.yaml),
//     .Capabilities (KubeVersion, APIVersions.Has), .Template (Name, BasePath), .Files (every chart file
//     outside templates/, except Chart.yaml, values.yaml and values.schema.json);
//   - functions include, tpl, required, toYaml, fromYaml, fromYamlArray, toJson, fromJson, fromJsonArray,
//     lookup (always empty, as with `helm template`), fail;
//   - missingkey=zero and the "<no value>" clean-up; templates/_* are partials (never output); NOTES.txt
//     is rendered (its errors fail) but reported apart; the chart's kubeVersion constraint is checked;
//   - each template's output is split on `---` into documents, empty ones are dropped, and every document
//     must parse as YAML (Helm fails with "YAML parse error" otherwise).
//
// Output: the manifests as `helm template` prints them, or with --json one JSON object
// {"values": merged values, "notes": text, "manifests": [{"source": path, "object": document}]}, each
// document converted to JSON the way the API server receives it (YAML 1.1 scalars, as sigs.k8s.io/yaml).
//
// Usage: helm-render [--json] [--release NAME] [--namespace NS] [--kube-version v1.30.0]
//
//	[--api-versions a/v1,b/v1] [-f values.yaml|-]... CHART_DIR
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	yaml2 "gopkg.in/yaml.v2"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// Values is the map Helm passes as .Values.
type Values = map[string]interface{}

// Metadata mirrors the fields of helm's chart.Metadata that templates read (.Chart.Name and so on).
type Metadata struct {
	Name         string            `yaml:"name"`
	Home         string            `yaml:"home"`
	Sources      []string          `yaml:"sources"`
	Version      string            `yaml:"version"`
	Description  string            `yaml:"description"`
	Keywords     []string          `yaml:"keywords"`
	Icon         string            `yaml:"icon"`
	APIVersion   string            `yaml:"apiVersion"`
	Condition    string            `yaml:"condition"`
	Tags         string            `yaml:"tags"`
	AppVersion   string            `yaml:"appVersion"`
	Deprecated   bool              `yaml:"deprecated"`
	Annotations  map[string]string `yaml:"annotations"`
	KubeVersion  string            `yaml:"kubeVersion"`
	Type         string            `yaml:"type"`
	Dependencies []interface{}     `yaml:"dependencies"`
}

// Release is .Release.
type Release struct {
	Name      string
	Namespace string
	Service   string
	IsInstall bool
	IsUpgrade bool
	Revision  int
}

// VersionSet is .Capabilities.APIVersions.
type VersionSet []string

// Has reports whether the API version (or version/Kind) is available, as in Helm.
func (v VersionSet) Has(apiVersion string) bool {
	for _, x := range v {
		if x == apiVersion {
			return true
		}
	}
	return false
}

// KubeVersion is .Capabilities.KubeVersion.
type KubeVersion struct {
	Version string
	Major   string
	Minor   string
}

func (k KubeVersion) String() string { return k.Version }

// GitVersion is the deprecated alias Helm keeps.
func (k KubeVersion) GitVersion() string { return k.Version }

// Capabilities is .Capabilities.
type Capabilities struct {
	KubeVersion KubeVersion
	APIVersions VersionSet
	HelmVersion map[string]string
}

// Files is .Files: the chart's non-template files.
type Files map[string][]byte

// Get returns a file's content, or "" when there is none.
func (f Files) Get(name string) string { return string(f[name]) }

// GetBytes returns a file's content as bytes.
func (f Files) GetBytes(name string) []byte { return f[name] }

// Glob returns the files whose names match a path.Match pattern (with ** as any depth).
func (f Files) Glob(pattern string) Files {
	re := globRegexp(pattern)
	out := Files{}
	for name, data := range f {
		if re.MatchString(name) {
			out[name] = data
		}
	}
	return out
}

// Lines splits a file into lines.
func (f Files) Lines(name string) []string {
	text := f.Get(name)
	if text == "" {
		return []string{}
	}
	return strings.Split(strings.TrimSuffix(text, "\n"), "\n")
}

// AsConfig renders the files as the `data` of a ConfigMap (base names as keys).
func (f Files) AsConfig() string {
	m := map[string]string{}
	for name, data := range f {
		m[path.Base(name)] = string(data)
	}
	return toYaml(m)
}

func globRegexp(pattern string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '*' && i+1 < len(pattern) && pattern[i+1] == '*':
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// TemplateInfo is .Template.
type TemplateInfo struct {
	Name     string
	BasePath string
}

func main() {
	var valueFiles, apiVersions listFlag
	asJSON := flag.Bool("json", false, "print one JSON object (values, notes, manifests as JSON) instead of YAML")
	release := flag.String("release", "release-name", "release name")
	namespace := flag.String("namespace", "default", "release namespace")
	kubeVersion := flag.String("kube-version", "v1.30.0", "Kubernetes version for .Capabilities")
	flag.Var(&valueFiles, "f", "values file (YAML or JSON; - for stdin), repeatable, later files win")
	flag.Var(&apiVersions, "api-versions", "extra API versions for .Capabilities.APIVersions (comma separated, repeatable)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: helm-render [--json] [--release NAME] [--namespace NS] [-f values.yaml]... CHART_DIR")
		os.Exit(2)
	}
	var extra []string
	for _, a := range apiVersions {
		extra = append(extra, strings.Split(a, ",")...)
	}
	out, err := run(flag.Arg(0), valueFiles, *release, *namespace, *kubeVersion, extra, *asJSON)
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}

type chartData struct {
	meta      Metadata
	defaults  Values
	templates map[string]string // "templates/x.yaml" → text
	files     Files
}

func loadChart(dir string) (*chartData, error) {
	c := &chartData{templates: map[string]string{}, files: Files{}}
	raw, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	if err := yaml2.Unmarshal(raw, &c.meta); err != nil {
		return nil, fmt.Errorf("Chart.yaml: %w", err)
	}
	if c.meta.Name == "" || c.meta.Version == "" {
		return nil, errors.New("Chart.yaml: name and version are required")
	}
	c.defaults = Values{}
	if raw, err := os.ReadFile(filepath.Join(dir, "values.yaml")); err == nil {
		if c.defaults, err = readValues(raw); err != nil {
			return nil, fmt.Errorf("values.yaml: %w", err)
		}
	}
	err = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if info.IsDir() {
			if rel == "charts" {
				return errors.New("subcharts are not supported by this renderer")
			}
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(rel, "templates/"):
			c.templates[rel] = string(data)
		case rel == "Chart.yaml" || rel == "values.yaml" || rel == "values.schema.json" || rel == ".helmignore":
		default:
			c.files[rel] = data
		}
		return nil
	})
	return c, err
}

// readValues parses YAML as Helm does (sigs.k8s.io/yaml: YAML → JSON → Go), so numbers are float64.
func readValues(raw []byte) (Values, error) {
	var node interface{}
	if err := yaml2.Unmarshal(raw, &node); err != nil {
		return nil, err
	}
	j, err := json.Marshal(jsonable(node))
	if err != nil {
		return nil, err
	}
	v := Values{}
	if string(j) == "null" {
		return v, nil
	}
	if err := json.Unmarshal(j, &v); err != nil {
		return nil, fmt.Errorf("values must be a map: %w", err)
	}
	return v, nil
}

// jsonable turns yaml.v2's map[interface{}]interface{} into map[string]interface{}, keys as strings.
func jsonable(v interface{}) interface{} {
	switch t := v.(type) {
	case map[interface{}]interface{}:
		m := make(map[string]interface{}, len(t))
		for k, x := range t {
			m[fmt.Sprint(k)] = jsonable(x)
		}
		return m
	case []interface{}:
		l := make([]interface{}, len(t))
		for i, x := range t {
			l[i] = jsonable(x)
		}
		return l
	default:
		return v
	}
}

// mergeMaps is Helm's merge of several -f files: later wins, maps merged, nulls kept.
func mergeMaps(a, b Values) Values {
	out := make(Values, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if vm, ok := v.(map[string]interface{}); ok {
			if am, ok := out[k].(map[string]interface{}); ok {
				out[k] = mergeMaps(am, vm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// coalesce lays user values over the chart defaults: maps merged deeply, a user null deletes the key.
func coalesce(user, defaults Values) Values {
	out := make(Values, len(defaults))
	for k, v := range defaults {
		out[k] = v
	}
	for k, v := range user {
		if v == nil {
			delete(out, k)
			continue
		}
		um, uok := v.(map[string]interface{})
		dm, dok := out[k].(map[string]interface{})
		if uok && dok {
			out[k] = coalesce(um, dm)
		} else {
			out[k] = v
		}
	}
	// Nulls inside defaults that the user did not touch stay (Helm keeps them as nil).
	return out
}

func toYaml(v interface{}) string {
	// Helm: sigs.k8s.io/yaml.Marshal (JSON first, then yaml.v2 with sorted keys), trailing newline cut.
	j, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	var node interface{}
	if err := yaml2.Unmarshal(j, &node); err != nil {
		return ""
	}
	out, err := yaml2.Marshal(node)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(out), "\n")
}

func fromYaml(s string) map[string]interface{} {
	v, err := readValues([]byte(s))
	if err != nil {
		return map[string]interface{}{"Error": err.Error()}
	}
	return v
}

func fromYamlArray(s string) []interface{} {
	var node interface{}
	if err := yaml2.Unmarshal([]byte(s), &node); err != nil {
		return []interface{}{err.Error()}
	}
	j, _ := json.Marshal(jsonable(node))
	var out []interface{}
	if err := json.Unmarshal(j, &out); err != nil {
		return []interface{}{err.Error()}
	}
	return out
}

func toJSON(v interface{}) string {
	j, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(j)
}

func fromJSON(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func fromJSONArray(s string) []interface{} {
	var a []interface{}
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		return []interface{}{err.Error()}
	}
	return a
}

type manifest struct {
	Source string      `json:"source"`
	Object interface{} `json:"object"`
	text   string
}

var docSep = regexp.MustCompile(`(?:^|\s*\n)---\s*`)

func run(dir string, valueFiles []string, releaseName, namespace, kubeVersion string, extraAPIs []string, asJSON bool) ([]byte, error) {
	c, err := loadChart(dir)
	if err != nil {
		return nil, err
	}
	user := Values{}
	for _, f := range valueFiles {
		var raw []byte
		if f == "-" {
			raw, err = io.ReadAll(os.Stdin)
		} else {
			raw, err = os.ReadFile(f)
		}
		if err != nil {
			return nil, err
		}
		v, err := readValues(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		user = mergeMaps(user, v)
	}
	values := coalesce(user, c.defaults)

	kv := regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)$`).FindStringSubmatch(kubeVersion)
	if kv == nil {
		return nil, fmt.Errorf("--kube-version: %q is not vMAJOR.MINOR.PATCH", kubeVersion)
	}
	kubeV := "v" + kv[1] + "." + kv[2] + "." + kv[3]
	if c.meta.KubeVersion != "" {
		// sprig's semverCompare is Masterminds/semver's constraint check, the one Helm uses.
		check := sprig.TxtFuncMap()["semverCompare"].(func(string, string) (bool, error))
		ok, err := check(c.meta.KubeVersion, kubeV)
		if err != nil {
			return nil, fmt.Errorf("Chart.yaml kubeVersion: %w", err)
		}
		if !ok {
			return nil, fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", c.meta.KubeVersion, kubeV)
		}
	}
	apis := VersionSet{"v1", "apps/v1", "batch/v1", "policy/v1", "autoscaling/v1", "autoscaling/v2",
		"networking.k8s.io/v1", "rbac.authorization.k8s.io/v1", "apiextensions.k8s.io/v1"}
	apis = append(apis, extraAPIs...)

	top := map[string]interface{}{
		"Values":  values,
		"Release": Release{Name: releaseName, Namespace: namespace, Service: "Helm", IsInstall: true, Revision: 1},
		"Chart":   c.meta,
		"Capabilities": Capabilities{
			KubeVersion: KubeVersion{Version: kubeV, Major: kv[1], Minor: kv[2]},
			APIVersions: apis,
			HelmVersion: map[string]string{"version": "v3.15.0"},
		},
		"Files":     c.files,
		"Subcharts": map[string]interface{}{},
	}

	root := template.New("gotpl")
	root.Option("missingkey=zero")
	funcs := template.FuncMap(sprig.TxtFuncMap())
	delete(funcs, "env")
	delete(funcs, "expandenv")
	includedNames := map[string]int{}
	funcs["include"] = func(name string, data interface{}) (string, error) {
		if includedNames[name] > 1000 {
			return "", fmt.Errorf("rendering template has a nested reference name: %s", name)
		}
		includedNames[name]++
		defer func() { includedNames[name]-- }()
		var buf strings.Builder
		if err := root.ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", fmt.Errorf("cannot parse template %q: %w", text, err)
		}
		var buf strings.Builder
		if err := t.Execute(&buf, data); err != nil {
			return "", fmt.Errorf("error during tpl function execution for %q: %w", text, err)
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	funcs["required"] = func(warn string, val interface{}) (interface{}, error) {
		if val == nil {
			return val, errors.New(warn)
		}
		if s, ok := val.(string); ok && s == "" {
			return val, errors.New(warn)
		}
		return val, nil
	}
	funcs["fail"] = func(msg string) (string, error) { return "", errors.New(msg) }
	funcs["toYaml"] = toYaml
	funcs["fromYaml"] = fromYaml
	funcs["fromYamlArray"] = fromYamlArray
	funcs["toJson"] = toJSON
	funcs["fromJson"] = fromJSON
	funcs["fromJsonArray"] = fromJSONArray
	funcs["lookup"] = func(string, string, string, string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	// No TOML library among Debian's Go packages here: fail loudly rather than render nothing.
	funcs["toToml"] = func(interface{}) (string, error) { return "", errors.New("toToml is not supported by helm-render") }
	root.Funcs(funcs)

	names := make([]string, 0, len(c.templates))
	for name := range c.templates {
		names = append(names, name)
	}
	sort.Strings(names)
	chartName := c.meta.Name
	for _, name := range names {
		full := chartName + "/" + name
		if _, err := root.New(full).Parse(c.templates[name]); err != nil {
			return nil, fmt.Errorf("parse error in %q: %w", full, err)
		}
	}

	var manifests []manifest
	notes := ""
	for _, name := range names {
		base := path.Base(name)
		if strings.HasPrefix(base, "_") {
			continue
		}
		full := chartName + "/" + name
		data := map[string]interface{}{}
		for k, v := range top {
			data[k] = v
		}
		data["Template"] = TemplateInfo{Name: full, BasePath: chartName + "/templates"}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, full, data); err != nil {
			return nil, fmt.Errorf("execution error in %s: %w", full, err)
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		if base == "NOTES.txt" {
			if path.Dir(name) == "templates" {
				notes = text
			}
			continue
		}
		for _, doc := range docSep.Split(text, -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var obj interface{}
			if err := yaml2.Unmarshal([]byte(doc), &obj); err != nil {
				return nil, fmt.Errorf("YAML parse error on %s: %w", full, err)
			}
			// A document of only comments is dropped, as Helm drops it.
			if obj == nil {
				continue
			}
			if _, ok := obj.(map[interface{}]interface{}); !ok {
				return nil, fmt.Errorf("YAML parse error on %s: a manifest must be a map, got %T", full, obj)
			}
			manifests = append(manifests, manifest{Source: full, Object: jsonable(obj), text: doc})
		}
	}

	if asJSON {
		out := map[string]interface{}{"values": values, "notes": notes, "manifests": manifests}
		if manifests == nil {
			out["manifests"] = []manifest{}
		}
		j, err := json.Marshal(out)
		if err != nil {
			return nil, err
		}
		return append(j, '\n'), nil
	}
	var b strings.Builder
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Source, strings.TrimSpace(m.text))
	}
	return []byte(b.String()), nil
}
