#include "controller/cli/completion.h"

#include "controller/cli/command_usage.h"

namespace nibble::cli {

std::string bash_completion() {
  std::string names, cases;
  for (const CommandUsage& c : commands()) {
    names += std::string(names.empty() ? "" : " ") + std::string(c.name);
    std::string flags;
    for (const std::string& f : command_flags(c)) flags += (flags.empty() ? "" : " ") + f;
    cases += "    " + std::string(c.name) + ") flags=\"" + flags + " --help\" ;;\n";
  }
  return R"BASH(# bash completion for nibble; load it with: source <(nibble completion bash)
_nibble_recipes() {
  # Recipe names from the controller (the same --controller as the command line, if any).
  "${COMP_WORDS[0]}" ${controller:+--controller "$controller"} get recipes -o name 2>/dev/null |
    sed 's|^modelrecipe/||'
}

_nibble() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  local cmd="" controller="" flags="" i=1
  while [ "$i" -lt "$COMP_CWORD" ]; do
    case "${COMP_WORDS[i]}" in
      --controller) controller=${COMP_WORDS[i+1]}; i=$((i + 2)); continue ;;
      -*) ;;
      *) [ -z "$cmd" ] && cmd=${COMP_WORDS[i]} ;;
    esac
    i=$((i + 1))
  done
  if [ -z "$cmd" ]; then
    COMPREPLY=($(compgen -W ")BASH" +
         names + R"BASH( --controller --help --version" -- "$cur"))
    return
  fi
  case "$prev" in
    -f|--filename) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    -o|--output) COMPREPLY=($(compgen -W "wide json yaml name" -- "$cur")); return ;;
    --for) COMPREPLY=($(compgen -W "condition=Ready condition=Progressing condition=Degraded" -- "$cur")); return ;;
    --controller|--tail|--replicas|--timeout) return ;;
  esac
  case "$cmd" in
)BASH" + cases +
         R"BASH(  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    return
  fi
  case "$cmd" in
    import|validate) COMPREPLY=($(compgen -f -- "$cur")) ;;
    completion) COMPREPLY=($(compgen -W "bash" -- "$cur")) ;;
    get|describe|delete)
      if [ "$prev" = "$cmd" ]; then
        COMPREPLY=($(compgen -W "recipes recipe" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "$(_nibble_recipes)" -- "$cur"))
      fi ;;
    scale|wait|logs)
      COMPREPLY=($(compgen -W "$(_nibble_recipes | sed 's|^|recipe/|')" -- "$cur")) ;;
  esac
}
complete -F _nibble nibble
)BASH";
}

}  // namespace nibble::cli
