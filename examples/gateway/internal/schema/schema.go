// Package schema writes the JSON Schema of the gateway's configuration
// from its Go types, and checks documents against the subset of JSON
// Schema it writes.
//
// The schema follows the decoder: a struct is an object whose properties
// are its fields' JSON names and that allows no others; a slice is an
// array, a map an object of its values, a pointer its element or null.
// Descriptions are the doc comments of the Go source.
package schema

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// ForConfig returns the schema of gw.Config, with the doc comments of the
// Go files in gwDir, the directory of package gw.
func ForConfig(gwDir string) ([]byte, error) {
	docs, err := Docs(gwDir)
	if err != nil {
		return nil, err
	}
	enums := map[string][]any{
		"Combo.strategy": append([]any{""}, toAny(gw.Strategies())...),
		"APIKey.scopes":  {"lease:exclusive"},
	}
	return Generate(reflect.TypeFor[gw.Config](), docs, enums,
		"routeguard gateway configuration")
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// Docs reads the doc comments of the types and struct fields declared in
// the non-test Go files of dir, keyed "Type" and "Type.Field".
func Docs(dir string) (map[string]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	docs := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		file, err := parser.ParseFile(fset, f, src, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, d := range file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, sp := range gd.Specs {
				ts := sp.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				if doc != nil {
					docs[ts.Name.Name] = clean(doc.Text())
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				for _, fl := range st.Fields.List {
					c := fl.Doc
					if c == nil {
						c = fl.Comment
					}
					for _, n := range fl.Names {
						if c != nil {
							docs[ts.Name.Name+"."+n.Name] = clean(c.Text())
						}
					}
				}
			}
		}
	}
	return docs, nil
}

// clean joins a comment's lines into one paragraph.
func clean(s string) string { return strings.Join(strings.Fields(s), " ") }

// Generate returns the schema of root, a struct type: every struct type
// reachable from it is a definition under $defs. docs are descriptions
// keyed "Type" and "Type.Field" (Go names); enums are allowed values keyed
// "Type.jsonName" (for a list, of its items).
func Generate(root reflect.Type, docs map[string]string, enums map[string][]any, title string) ([]byte, error) {
	g := &gen{docs: docs, enums: enums, defs: map[string]any{}}
	ref := g.typ(root)
	out := map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"title":   title,
		"$ref":    ref["$ref"],
		"$defs":   g.defs,
	}
	if g.err != nil {
		return nil, g.err
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

type gen struct {
	docs  map[string]string
	enums map[string][]any
	defs  map[string]any
	err   error
}

func (g *gen) typ(t reflect.Type) map[string]any {
	switch t.Kind() {
	case reflect.Pointer:
		e := g.typ(t.Elem())
		if tt, ok := e["type"].(string); ok {
			e["type"] = []any{tt, "null"}
			return e
		}
		return map[string]any{"anyOf": []any{e, map[string]any{"type": "null"}}}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": g.typ(t.Elem())}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			g.err = fmt.Errorf("schema: map key of %v is not a string", t)
		}
		return map[string]any{"type": "object", "additionalProperties": g.typ(t.Elem())}
	case reflect.Struct:
		name := t.Name()
		if _, done := g.defs[name]; !done {
			g.defs[name] = nil // placeholder against recursion
			props := map[string]any{}
			for i := range t.NumField() {
				f := t.Field(i)
				if !f.IsExported() {
					continue
				}
				jn, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if jn == "-" {
					continue
				}
				if jn == "" {
					jn = f.Name
				}
				p := g.typ(f.Type)
				if d := g.docs[name+"."+f.Name]; d != "" {
					p["description"] = d
				}
				if e, ok := g.enums[name+"."+jn]; ok {
					if items, ok := p["items"].(map[string]any); ok {
						items["enum"] = e
					} else {
						p["enum"] = e
					}
				}
				props[jn] = p
			}
			def := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
			if d := g.docs[name]; d != "" {
				def["description"] = d
			}
			g.defs[name] = def
		}
		return map[string]any{"$ref": "#/$defs/" + name}
	}
	g.err = fmt.Errorf("schema: unsupported type %v", t)
	return map[string]any{}
}

// Validate checks doc, a decoded JSON value (objects map[string]any,
// numbers float64), against schema, a schema as Generate writes it, and
// returns each violation with its path.
func Validate(schema []byte, doc any) ([]string, error) {
	var s map[string]any
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, err
	}
	v := &validator{root: s}
	v.check(s, doc, "")
	return v.errs, nil
}

type validator struct {
	root map[string]any
	errs []string
}

func (v *validator) fail(path, format string, a ...any) {
	if path == "" {
		path = "(document)"
	}
	v.errs = append(v.errs, path+": "+fmt.Sprintf(format, a...))
}

func (v *validator) check(s map[string]any, doc any, path string) {
	if ref, ok := s["$ref"].(string); ok {
		name, ok := strings.CutPrefix(ref, "#/$defs/")
		def, _ := v.root["$defs"].(map[string]any)[name].(map[string]any)
		if !ok || def == nil {
			v.fail(path, "unresolvable $ref %q", ref)
			return
		}
		v.check(def, doc, path)
		return
	}
	if alts, ok := s["anyOf"].([]any); ok {
		for _, alt := range alts {
			sub := &validator{root: v.root}
			sub.check(alt.(map[string]any), doc, path)
			if len(sub.errs) == 0 {
				return
			}
		}
		v.fail(path, "matches none of the allowed forms")
		return
	}
	if t, ok := s["type"]; ok && !typeOK(t, doc) {
		v.fail(path, "must be of type %v", t)
		return
	}
	if e, ok := s["enum"].([]any); ok && !slices.ContainsFunc(e, func(x any) bool { return reflect.DeepEqual(x, doc) }) {
		v.fail(path, "%v is not one of %v", doc, e)
	}
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch d := doc.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		keys := make([]string, 0, len(d))
		for k := range d {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if p, ok := props[k].(map[string]any); ok {
				v.check(p, d[k], join(k))
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if !ap {
					v.fail(join(k), "unknown field")
				}
			case map[string]any:
				v.check(ap, d[k], join(k))
			}
		}
	case []any:
		if items, ok := s["items"].(map[string]any); ok {
			for i, e := range d {
				v.check(items, e, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
}

func typeOK(t any, doc any) bool {
	if list, ok := t.([]any); ok {
		return slices.ContainsFunc(list, func(x any) bool { return typeOK(x, doc) })
	}
	switch t {
	case "object":
		_, ok := doc.(map[string]any)
		return ok
	case "array":
		_, ok := doc.([]any)
		return ok
	case "string":
		_, ok := doc.(string)
		return ok
	case "boolean":
		_, ok := doc.(bool)
		return ok
	case "number":
		_, ok := doc.(float64)
		return ok
	case "integer":
		f, ok := doc.(float64)
		return ok && f == float64(int64(f))
	case "null":
		return doc == nil
	}
	return false
}
