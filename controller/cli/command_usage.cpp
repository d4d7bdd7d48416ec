#include "controller/cli/command_usage.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "controller/cli/render_command.h"
#include "controller/kube/render_flags.h"

namespace nibble::cli {
namespace {

constexpr std::array kCommands = {
    CommandUsage{"apply", "apply -f FILE [-f FILE...] [--dry-run]",
                 "  create or update recipes (FILE may hold several, separated by ---;\n"
                 "  - reads stdin)\n"
                 "  -f, --filename FILE   a file of recipes (repeatable)\n"
                 "  --dry-run             validate on the controller, store nothing\n",
                 true},
    CommandUsage{"get", "get recipes [NAME...] [-o wide|json|yaml|name] [-w]",
                 "  phase, ready/desired replicas and endpoint of each recipe\n"
                 "  -o, --output FORMAT   wide (more columns), json, yaml, or name\n"
                 "                        (modelrecipe/NAME)\n"
                 "  -w, --watch           after the list, print each recipe again whenever\n"
                 "                        it changes (until interrupted)\n",
                 true},
    CommandUsage{"describe", "describe recipe NAME...",
                 "  status, conditions, engines (pid, port, log file) and spec\n", true},
    CommandUsage{"delete", "delete recipe NAME... | delete -f FILE",
                 "  remove recipes; their engines drain and stop\n"
                 "  -f, --filename FILE   delete the recipes the file names\n",
                 true},
    CommandUsage{"scale", "scale recipe/NAME --replicas N",
                 "  set spec.replicas.desired (the scale subresource's field), within the\n"
                 "  recipe's [replicas.min, replicas.max]. With spec.autoscaling.enabled\n"
                 "  false the recipe runs N replicas; with the built-in autoscaler on, it\n"
                 "  starts from N and follows load\n"
                 "  --replicas N          the replica count\n",
                 true},
    CommandUsage{"wait", "wait recipe/NAME [--for condition=Ready] [--timeout 300s]",
                 "  block until the condition is True\n"
                 "  --for condition=TYPE  Ready (default), Progressing or Degraded\n"
                 "  --timeout DURATION    give up after this long (default 300s)\n",
                 true},
    CommandUsage{"logs", "logs recipe/NAME [--tail N] [-f] [-p]",
                 "  the last N lines of each engine's log, prefixed with its id\n"
                 "  --tail N              lines per engine (default 50)\n"
                 "  -f, --follow          then print what each engine writes, new replicas\n"
                 "                        included, until interrupted or the recipe is deleted\n"
                 "  -p, --previous        the log of the recipe's last replica that is gone\n"
                 "                        (crashed, replaced or scaled away)\n",
                 true},
    CommandUsage{"import", "import FILE",
                 "  convert a spark-vllm-docker recipe to a ModelRecipe (YAML on stdout;\n"
                 "  dropped vLLM flags listed on stderr)\n",
                 false},
    CommandUsage{"validate", "validate FILE",
                 "  check a ModelRecipe; prints every problem with its field\n", false},
    CommandUsage{"render", "render -f FILE [--namespace NS] [--engine-image IMAGE] [-o yaml|json]",
                 "  print the Kubernetes objects (Deployment, Service) the controller\n"
                 "  applies for each recipe; `nibble render --help` lists the flags\n",
                 false},
    CommandUsage{"pull", "pull hf://org/name[@revision] [CACHE_DIR]",
                 "  download the files serving needs into CACHE_DIR (default\n"
                 "  $NIBBLE_CACHE or ~/.cache/nibble), resuming interrupted files;\n"
                 "  HF_TOKEN for gated repos, HF_ENDPOINT for a mirror\n",
                 false},
    CommandUsage{"completion", "completion bash",
                 "  print a bash completion script: source <(nibble completion bash)\n", false},
    CommandUsage{"version", "version", "  print the version (also: nibble --version)\n", false},
};

// The synopsis, then the description up to its first flag line, indented under it.
std::string usage_line(const CommandUsage& c) {
  std::string text = "  " + std::string(c.synopsis) + "\n";
  const std::string_view d = c.description;
  for (std::size_t at = 0; at < d.size();) {
    const std::size_t end = std::min(d.find('\n', at), d.size());
    const std::string_view line = d.substr(at, end - at);
    if (line.starts_with("  -")) break;
    text += "    " + std::string(line) + "\n";
    at = end + 1;
  }
  return text;
}

}  // namespace

std::span<const CommandUsage> commands() {
  return kCommands;
}

const CommandUsage* find_command(std::string_view name) {
  for (const CommandUsage& c : kCommands) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::string nibble_usage() {
  std::string text =
      "usage: nibble [--controller URL] <command> [args]\n\n"
      "commands through a running nibble-controller (--controller URL or $NIBBLE_CONTROLLER,\n"
      "default http://127.0.0.1:8001):\n";
  for (const CommandUsage& c : kCommands)
    if (c.needs_controller) text += usage_line(c);
  text += "\ncommands that work without a controller:\n";
  for (const CommandUsage& c : kCommands)
    if (!c.needs_controller) text += usage_line(c);
  text += "\n'nibble COMMAND --help' describes one command; nibble --version prints the version.\n";
  return text;
}

std::string command_usage(const CommandUsage& c) {
  if (c.name == "render") return std::string(render_usage()) + kube::render_flags_usage();
  std::string text = "usage: nibble " + std::string(c.synopsis) + "\n" + std::string(c.description);
  if (c.needs_controller) {
    text +=
        "  --controller URL      the controller's API (default $NIBBLE_CONTROLLER, else\n"
        "                        http://127.0.0.1:8001)\n";
  }
  return text;
}

std::vector<std::string> command_flags(const CommandUsage& c) {
  const std::string text = command_usage(c);
  std::vector<std::string> flags;
  for (std::size_t at = 0; at < text.size();) {
    const bool word_start = at == 0 || text[at - 1] == ' ' || text[at - 1] == '[' ||
                            text[at - 1] == '\n' || text[at - 1] == '|';
    if (!word_start || text[at] != '-' || at + 1 >= text.size() ||
        !(std::isalpha(static_cast<unsigned char>(text[at + 1])) || text[at + 1] == '-')) {
      ++at;
      continue;
    }
    std::size_t end = at + 1;
    while (end < text.size() &&
           (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '-'))
      ++end;
    const std::string flag = text.substr(at, end - at);
    const std::size_t dashes = flag.starts_with("--") ? 2 : 1;  // "---" (a YAML separator) is none
    if (flag.size() > dashes && std::isalpha(static_cast<unsigned char>(flag[dashes])) &&
        std::find(flags.begin(), flags.end(), flag) == flags.end())
      flags.push_back(flag);
    at = end;
  }
  return flags;
}

}  // namespace nibble::cli
