#include "tools/ngram-bench/workloads.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <stdexcept>

namespace nibble::tools {

namespace fs = std::filesystem;
using tokenizer::TokenId;

namespace {

const std::set<std::string> kTextExtensions = {".md",  ".txt", ".cpp",  ".h", ".cu",
                                               ".cuh", ".py",  ".yaml", ".sh"};
const std::set<std::string> kSourceExtensions = {".cpp", ".h", ".cu", ".cuh", ".py"};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool is_source(const Document& d) {
  return kSourceExtensions.count(fs::path(d.name).extension().string()) > 0;
}

// Paragraphs (blocks between blank lines) of 200..2,000 characters, with the nearest markdown
// heading above each (the document's name where there is none).
struct Paragraph {
  std::string text, heading;
};
std::vector<Paragraph> paragraphs(const Document& d) {
  std::vector<Paragraph> out;
  std::string heading = d.name;
  std::size_t at = 0;
  while (at < d.text.size()) {
    std::size_t end = d.text.find("\n\n", at);
    if (end == std::string::npos) end = d.text.size();
    const std::string block = d.text.substr(at, end - at);
    if (block.rfind("#", 0) == 0) {
      heading = block.substr(0, block.find('\n'));
      heading.erase(0, heading.find_first_not_of("# "));
    } else if (block.size() >= 200 && block.size() <= 2000) {
      out.push_back({block, heading});
    }
    at = end + 2;
  }
  return out;
}

std::string first_words(const std::string& text, int n) {
  std::string out;
  std::size_t at = 0;
  for (int i = 0; i < n && at < text.size(); ++i) {
    const std::size_t start = text.find_first_not_of(" \n\t", at);
    if (start == std::string::npos) break;
    std::size_t end = text.find_first_of(" \n\t", start);
    if (end == std::string::npos) end = text.size();
    if (!out.empty()) out += ' ';
    out += text.substr(start, end - start);
    at = end;
  }
  return out;
}

bool word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// Whole-word occurrences of identifiers of 4 or more characters.
std::map<std::string, int> identifiers(const std::string& text) {
  std::map<std::string, int> count;
  for (std::size_t i = 0; i < text.size();) {
    if (!word_char(text[i])) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < text.size() && word_char(text[j])) ++j;
    if (j - i >= 4 && !std::isdigit(static_cast<unsigned char>(text[i])))
      ++count[text.substr(i, j - i)];
    i = j;
  }
  return count;
}

// Identifiers used at least three times: what a rename request names.
std::vector<std::string> renameable(const std::string& text) {
  std::vector<std::string> names;
  for (const auto& [name, count] : identifiers(text))
    if (count >= 3) names.push_back(name);
  return names;
}

std::string rename_word(const std::string& text, const std::string& from, const std::string& to) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    if (text.compare(i, from.size(), from) == 0 && (i == 0 || !word_char(text[i - 1])) &&
        (i + from.size() == text.size() || !word_char(text[i + from.size()]))) {
      out += to;
      i += from.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

}  // namespace

std::vector<Document> read_corpus(const std::vector<fs::path>& paths) {
  std::vector<Document> docs;
  for (const fs::path& root : paths) {
    if (!fs::exists(root))
      throw std::runtime_error("corpus path " + root.string() + " does not exist");
    std::vector<fs::path> files;
    if (fs::is_directory(root)) {
      for (const auto& e : fs::recursive_directory_iterator(root))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
    } else {
      files.push_back(root);
    }
    for (const fs::path& f : files)
      if (kTextExtensions.count(f.extension().string()))
        docs.push_back({f.lexically_normal().string(), read_file(f)});
  }
  if (docs.empty()) throw std::runtime_error("the corpus has no text file (.md, .cpp, .py, ...)");
  return docs;
}

const char* workload_name(Workload w) {
  switch (w) {
    case Workload::kExtraction:
      return "extraction";
    case Workload::kCodeEdit:
      return "code-edit";
    case Workload::kUnrelated:
      return "unrelated";
  }
  return "?";
}

WorkloadBuilder::WorkloadBuilder(const tokenizer::Tokenizer& tok, std::vector<Document> corpus)
    : tok_(tok), docs_(std::move(corpus)) {
  for (const Document& d : docs_)
    doc_tokens_.push_back(tok_.encode("### " + d.name + "\n" + d.text + "\n\n"));
}

Request WorkloadBuilder::build(Workload w, int context_tokens, std::uint64_t seed,
                               int index) const {
  const std::uint64_t s = seed * 1000003u + std::uint64_t(index);
  switch (w) {
    case Workload::kExtraction:
      return extraction(context_tokens, s, false);
    case Workload::kCodeEdit:
      return code_edit(context_tokens, s);
    case Workload::kUnrelated:
      return extraction(context_tokens, s, true);
  }
  throw std::logic_error("unknown workload");
}

Request WorkloadBuilder::extraction(int context_tokens, std::uint64_t seed, bool unrelated) const {
  std::mt19937_64 rng(seed);
  const std::size_t n = docs_.size();
  // Whole documents from a random one on, while they fit the budget.
  std::vector<std::size_t> in_context;
  std::vector<TokenId> context;
  const std::size_t first = std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t d = (first + i) % n;
    if (context.size() + doc_tokens_[d].size() > std::size_t(context_tokens)) continue;
    context.insert(context.end(), doc_tokens_[d].begin(), doc_tokens_[d].end());
    in_context.push_back(d);
  }
  std::vector<std::size_t> sources;
  for (std::size_t d = 0; d < n; ++d) {
    const bool inside = std::find(in_context.begin(), in_context.end(), d) != in_context.end();
    if (inside != unrelated && !paragraphs(docs_[d]).empty()) sources.push_back(d);
  }
  if (sources.empty())
    throw std::runtime_error(unrelated ? "every document with a paragraph is in the context: the "
                                         "unrelated workload needs a larger corpus"
                                       : "no document with a paragraph of 200..2,000 characters "
                                         "fits a context of " +
                                             std::to_string(context_tokens) + " tokens");
  const Document& doc =
      docs_[sources[std::uniform_int_distribution<std::size_t>(0, sources.size() - 1)(rng)]];
  const auto ps = paragraphs(doc);
  const Paragraph& p = ps[std::uniform_int_distribution<std::size_t>(0, ps.size() - 1)(rng)];
  Request r;
  r.prompt = context;
  const auto question =
      tok_.encode("\nQuote, word for word, the paragraph of " + doc.name + " that begins \"" +
                  first_words(p.text, 6) + "\", then name the section it is in.\n");
  r.prompt.insert(r.prompt.end(), question.begin(), question.end());
  r.answer = tok_.encode("Here is the paragraph:\n\n" + p.text + "\n\nIt is in the section \"" +
                         p.heading + "\".");
  return r;
}

Request WorkloadBuilder::code_edit(int context_tokens, std::uint64_t seed) const {
  std::mt19937_64 rng(seed);
  std::vector<std::size_t> files;
  for (std::size_t d = 0; d < docs_.size(); ++d)
    if (is_source(docs_[d]) && doc_tokens_[d].size() <= std::size_t(context_tokens) &&
        doc_tokens_[d].size() >= std::size_t(context_tokens / 8) &&
        !renameable(docs_[d].text).empty())
      files.push_back(d);
  if (files.empty())
    throw std::runtime_error("no source file of " + std::to_string(context_tokens / 8) + ".." +
                             std::to_string(context_tokens) + " tokens in the corpus");
  const Document& doc =
      docs_[files[std::uniform_int_distribution<std::size_t>(0, files.size() - 1)(rng)]];
  const auto names = renameable(doc.text);
  const std::string from =
      names[std::uniform_int_distribution<std::size_t>(0, names.size() - 1)(rng)];
  const std::string to = "renamed_" + from;
  Request r;
  r.prompt =
      tok_.encode("Rename `" + from + "` to `" + to +
                  "` in this file and return the whole file.\n\n```\n" + doc.text + "\n```\n");
  r.answer = tok_.encode("```\n" + rename_word(doc.text, from, to) + "\n```");
  return r;
}

}  // namespace nibble::tools
