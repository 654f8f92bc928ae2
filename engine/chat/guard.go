package chat

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/ardanlabs/jinja"
)

var (
	macroTag     = regexp.MustCompile(`\{%[-+]?\s*(macro|endmacro)\b(?:\s+([A-Za-z_]\w*))?`)
	identifier   = regexp.MustCompile(`[A-Za-z_]\w*`)
	callFollows  = regexp.MustCompile(`^\s*\(`)
	recursiveFor = regexp.MustCompile(`\{%[-+]?\s*for\b(?:[^%]|%[^}])*\brecursive\b`)
)

// check refuses templates that could recurse without bound. The engine
// evaluates macros and recursive loops on the goroutine stack, and a stack
// overflow ends a Go process whatever recovers it, so recursion is judged
// from the source: a template may define macros that call other macros, but
// not in a cycle, and may use a macro only by calling it (a macro passed
// around as a value could be called from anywhere). The test is
// conservative: a macro's name in a string counts as a use.
func check(source string) error {
	if len(source) > MaxTemplateBytes {
		return fmt.Errorf("chat: template of %d bytes is over the %d-byte limit: %w", len(source), MaxTemplateBytes, ErrTemplate)
	}
	if recursiveFor.MatchString(source) {
		return fmt.Errorf("chat: template uses a recursive loop: %w", ErrTemplate)
	}
	bodies, defs, err := macroBodies(source)
	if err != nil {
		return err
	}
	for _, loc := range identifier.FindAllStringIndex(source, -1) {
		name := source[loc[0]:loc[1]]
		if _, ok := bodies[name]; ok && !defs[loc[0]] && !callFollows.MatchString(source[loc[1]:]) {
			return fmt.Errorf("chat: template uses macro %q as a value: %w", name, ErrTemplate)
		}
	}
	calls := map[string][]string{}
	for name, body := range bodies {
		for _, id := range identifier.FindAllString(body, -1) {
			if _, ok := bodies[id]; ok && !slices.Contains(calls[name], id) {
				calls[name] = append(calls[name], id)
			}
		}
	}
	if cycle := findCycle(calls); cycle != nil {
		return fmt.Errorf("chat: template macros call themselves (%v): %w", cycle, ErrTemplate)
	}
	return nil
}

// macroBodies returns each macro's body text by name, and the offsets of the
// names in the macro tags that define them.
func macroBodies(source string) (bodies map[string]string, defs map[int]bool, err error) {
	type open struct {
		name string
		end  int // where the body starts
	}
	bodies, defs = map[string]string{}, map[int]bool{}
	var stack []open
	for _, m := range macroTag.FindAllStringSubmatchIndex(source, -1) {
		if source[m[2]:m[3]] == "macro" {
			if m[4] < 0 {
				return nil, nil, fmt.Errorf("chat: template has a macro without a name: %w", ErrTemplate)
			}
			defs[m[4]] = true
			stack = append(stack, open{name: source[m[4]:m[5]], end: m[1]})
			continue
		}
		if len(stack) == 0 {
			return nil, nil, fmt.Errorf("chat: template has endmacro without macro: %w", ErrTemplate)
		}
		top := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		bodies[top.name] += source[top.end:m[0]]
	}
	if len(stack) > 0 {
		return nil, nil, fmt.Errorf("chat: template macro %q has no endmacro: %w", stack[0].name, ErrTemplate)
	}
	return bodies, defs, nil
}

// findCycle returns a cycle in the call graph, or nil.
func findCycle(calls map[string][]string) []string {
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(string) []string
	visit = func(n string) []string {
		state[n] = onPath
		path = append(path, n)
		for _, m := range calls[n] {
			switch state[m] {
			case onPath:
				return append(slices.Clone(path[slices.Index(path, m):]), m)
			case unseen:
				if c := visit(m); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[n] = done
		return nil
	}
	names := make([]string, 0, len(calls))
	for n := range calls {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if state[n] == unseen {
			if c := visit(n); c != nil {
				return c
			}
		}
	}
	return nil
}

// boundedRange is Python's range() drawing its elements from a budget shared
// by the whole render, so that nested loops cannot multiply without bound.
func boundedRange(budget *int) jinja.Value {
	return jinja.NewCallable("range", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		var bounds [3]int64
		for i, a := range args {
			if i >= 3 || !a.IsInt() {
				return jinja.Undefined(), fmt.Errorf("range takes one to three integers")
			}
			bounds[i] = a.AsInt()
		}
		start, stop, step := int64(0), bounds[0], int64(1)
		switch len(args) {
		case 0:
			return jinja.Undefined(), fmt.Errorf("range takes one to three integers")
		case 2:
			start, stop = bounds[0], bounds[1]
		case 3:
			start, stop, step = bounds[0], bounds[1], bounds[2]
		}
		if step == 0 {
			return jinja.Undefined(), fmt.Errorf("range step must not be zero")
		}
		var n int64
		if step > 0 && stop > start {
			n = (stop - start + step - 1) / step
		} else if step < 0 && start > stop {
			n = (start - stop - step - 1) / -step
		}
		if n > int64(*budget) {
			return jinja.Undefined(), fmt.Errorf("range of %d elements is over the render's remaining %d", n, *budget)
		}
		*budget -= int(n)
		items := make([]jinja.Value, n)
		for i := range items {
			items[i] = jinja.NewInt(start + int64(i)*step)
		}
		return jinja.NewList(items), nil
	})
}
