// The parts of CodeMirror 6 that the SQL console's editor (static/js/editor.js) uses,
// bundled by scripts/build_editor.sh into static/vendor/codemirror/codemirror.min.js as
// the global `LakeviewCodeMirror`. Only what is named here is bundled.
export { ChangeSet, EditorSelection, EditorState, Prec } from "@codemirror/state";
export {
  EditorView,
  drawSelection,
  highlightActiveLine,
  highlightActiveLineGutter,
  highlightSpecialChars,
  keymap,
  lineNumbers,
  placeholder,
} from "@codemirror/view";
export { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
export {
  HighlightStyle,
  bracketMatching,
  indentOnInput,
  syntaxHighlighting,
  syntaxTree,
} from "@codemirror/language";
export {
  autocompletion,
  closeBrackets,
  closeBracketsKeymap,
  completionKeymap,
  snippetCompletion,
  startCompletion,
} from "@codemirror/autocomplete";
export { setDiagnostics } from "@codemirror/lint";
export { SQLDialect, keywordCompletionSource, sql } from "@codemirror/lang-sql";
export { tags } from "@lezer/highlight";
