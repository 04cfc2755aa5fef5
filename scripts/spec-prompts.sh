# The prompts of the speculative-decoding benchmarks (bench-lookup.sh, bench-draft.sh), sourced:
# EDIT, a code-editing prompt (the model rewrites a given function with a rename: the answer
# repeats the prompt), OPEN, an open-ended one, and prompt FAMILY TEXT, which wraps a text in
# the family's turn markers (`ember run` is raw completion; --parse-special reads them; "raw"
# leaves it as it is, for synthetic models, which have no chat template).
FUNCTION='def count_words(lines):
    count = 0
    seen = set()
    for line in lines:
        for word in line.split():
            word = word.strip().lower()
            if word in seen:
                continue
            seen.add(word)
            count += 1
    return count'
EDIT="Rename the variable \`count\` to \`total\` in this Python function. Reply with only the whole function.

$FUNCTION"
OPEN='Write a short story about a lighthouse keeper who finds a message in a bottle.'

# The model's own turn markers (ember run is raw completion; --parse-special reads them).
prompt() {  # family text
    case "$1" in
        raw) printf '%s' "$2" ;;
        gemma) printf '<start_of_turn>user\n%s<end_of_turn>\n<start_of_turn>model\n' "$2" ;;
        chatml) printf '<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n' "$2" ;;
    esac
}

