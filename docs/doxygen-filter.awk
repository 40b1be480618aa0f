#!/usr/bin/awk -f
# docs/doxygen-filter.awk — Doxygen's INPUT_FILTER for attn's headers.
#
# The headers are commented in plain //, the way STYLE.md shows; this filter
# hands Doxygen the same text with those comments marked as documentation:
#
#   - the comment block that opens a file documents the file (@file at the
#     end of its last line);
#   - a comment block right above a declaration (at namespace or class
#     scope, not inside a function body) documents that declaration (///);
#   - a comment after a declaration on the same line, and its continuation
#     lines aligned under it, document that declaration (///<);
#   - section rules (// ---- name ----) and comments in function bodies stay
#     plain comments.
#
# Words in angle brackets (<pad>, <bos>) are escaped outside `code spans`,
# so that Doxygen does not read them as HTML. Lines are never added or
# removed: Doxygen's line numbers stay those of the header.

# Text of a comment, made safe for Doxygen's markup.
function escape(text,    out, parts, n, i) {
  n = split(text, parts, "`")
  out = ""
  for (i = 1; i <= n; i++) {
    if (i % 2 == 1) {  # outside a code span
      gsub(/\\/, "\\\\\\\\", parts[i])
      gsub(/@/, "\\@", parts[i])
      gsub(/</, "\\<", parts[i])
      gsub(/>/, "\\>", parts[i])
      gsub(/&/, "\\&", parts[i])
      gsub(/#/, "\\#", parts[i])
      gsub(/%/, "\\%", parts[i])
    }
    out = out parts[i] (i < n ? "`" : "")
  }
  return out
}

# The line without string and character literals, for counting braces.
function code_only(line) {
  gsub(/"([^"\\]|\\.)*"/, "\"\"", line)
  gsub(/'([^'\\]|\\.)*'/, "''", line)
  sub(/\/\/.*/, "", line)
  return line
}

# Tracks braces: scope[d] is 1 when brace depth d was opened by a namespace,
# class, struct, union or enum (whose members may be documented), 0 for a
# function body or an initializer.
function track_braces(line,    c, i, ch, kind) {
  c = code_only(line)
  kind = (c ~ /(^|[^A-Za-z0-9_])(namespace|class|struct|union|enum)([^A-Za-z0-9_]|$)/ || pending_scope) ? 1 : 0
  if (c ~ /(^|[^A-Za-z0-9_])(namespace|class|struct|union|enum)([^A-Za-z0-9_]|$)/ && c !~ /[{;]/)
    pending_scope = 1  # "struct X" with its brace on a later line
  for (i = 1; i <= length(c); i++) {
    ch = substr(c, i, 1)
    if (ch == "{") {
      depth++
      scope[depth] = kind
      pending_scope = 0
    } else if (ch == "}") {
      if (depth > 0) depth--
    } else if (ch == ";") {
      pending_scope = 0
    }
  }
}

function in_body(    d) {
  for (d = 1; d <= depth; d++)
    if (!scope[d]) return 1
  return 0
}

BEGIN {
  depth = 0
  pending_scope = 0
  file_header = 1  # still in the comment block that opens the file
  header_lines = 0
  trailing_col = 0  # column of the last trailing comment, for its continuation lines
}

{
  line = $0
  if (match(line, /^[ \t]*\/\//)) {  # a whole-line comment
    indent = substr(line, 1, RLENGTH - 2)
    text = substr(line, RLENGTH + 1)
    if (file_header) {  # held back until it ends, to mark its last line @file
      if (header_lines > 0) print held
      held = "///" escape(text)
      header_lines++
      next
    }
    if (trailing_col > 0 && RLENGTH - 1 == trailing_col) {  # continues a trailing comment
      print indent "///<" escape(text)
      next
    }
    trailing_col = 0
    if (in_body() || text ~ /^ *(----|====)/) {
      print line
      next
    }
    print indent "///" escape(text)
    next
  }
  if (file_header && header_lines > 0) print held " @file"
  file_header = 0
  trailing_col = 0
  c = code_only(line)
  # A declaration with a comment after it on the same line.
  if (!in_body() && c ~ /[;,{][ \t]*$/ && match(line, /[;,{][ \t]+\/\/ /)) {
    pos = RSTART + RLENGTH - 3  # the first slash
    head = substr(line, 1, pos - 1)
    if (index(head, "\"") == 0) {
      trailing_col = pos
      text = substr(line, pos + 2)
      track_braces(line)
      if (substr(head, length(head)) ~ /[ \t]/ && c ~ /[;,][ \t]*$/) {
        print head "///<" escape(text)
        next
      }
      print line
      trailing_col = 0
      next
    }
  }
  track_braces(line)
  print line
}
