package gguf

import "fmt"

// ValueType is the type tag of a metadata value in a GGUF file.
type ValueType uint32

// The metadata value types, numbered as in GGUF.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("value-type(%d)", uint32(t))
}

// size is the encoded size of a scalar of type t; 0 for strings and arrays.
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// Array is a metadata array. Values is a typed slice matching Elem:
// []uint8, []int8, []uint16, []int16, []uint32, []int32, []float32, []bool,
// []string, []uint64, []int64, []float64, or []Array for nested arrays.
type Array struct {
	Elem   ValueType
	Values any
}

// Len is the number of elements in a.
func (a Array) Len() int {
	switch v := a.Values.(type) {
	case []uint8:
		return len(v)
	case []int8:
		return len(v)
	case []uint16:
		return len(v)
	case []int16:
		return len(v)
	case []uint32:
		return len(v)
	case []int32:
		return len(v)
	case []float32:
		return len(v)
	case []bool:
		return len(v)
	case []string:
		return len(v)
	case []uint64:
		return len(v)
	case []int64:
		return len(v)
	case []float64:
		return len(v)
	case []Array:
		return len(v)
	}
	return 0
}

// KV is one metadata entry, in file order.
type KV struct {
	Key   string
	Value any
}

// asInt64 converts any integer scalar to int64; ok is false for other types
// and for uint64 values that do not fit.
func asInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case uint64:
		if x > 1<<63-1 {
			return 0, false
		}
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

// asFloat64 converts any numeric scalar to float64.
func asFloat64(v any) (float64, bool) {
	switch x := v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	case uint64:
		return float64(x), true
	}
	if i, ok := asInt64(v); ok {
		return float64(i), true
	}
	return 0, false
}
