// The analysis the security index asks for (its `email` analyzer), which the unpublished
// analysis-common module provides in a real distribution: the `uax_url_email` tokenizer and the
// `pattern_capture`, `lowercase` and `unique` token filters, each a thin wrapper over Lucene's own.
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

import org.apache.lucene.analysis.LowerCaseFilter;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.Tokenizer;
import org.apache.lucene.analysis.email.UAX29URLEmailTokenizer;
import org.apache.lucene.analysis.miscellaneous.RemoveDuplicatesTokenFilter;
import org.apache.lucene.analysis.pattern.PatternCaptureGroupTokenFilter;
import org.elasticsearch.common.settings.Settings;
import org.elasticsearch.index.analysis.TokenFilterFactory;
import org.elasticsearch.index.analysis.TokenizerFactory;
import org.elasticsearch.indices.analysis.AnalysisModule.AnalysisProvider;
import org.elasticsearch.plugins.AnalysisPlugin;
import org.elasticsearch.plugins.Plugin;

public final class SandboxAnalysisPlugin extends Plugin implements AnalysisPlugin {

    @Override
    public Map<String, AnalysisProvider<TokenFilterFactory>> getTokenFilters() {
        return Map.of(
            "pattern_capture", (indexSettings, env, name, settings) -> patternCapture(name, settings),
            "lowercase", (indexSettings, env, name, settings) -> filter(name, LowerCaseFilter::new),
            "unique", (indexSettings, env, name, settings) -> filter(name, RemoveDuplicatesTokenFilter::new));
    }

    @Override
    public Map<String, AnalysisProvider<TokenizerFactory>> getTokenizers() {
        return Map.of("uax_url_email", (indexSettings, env, name, settings) -> new TokenizerFactory() {
            @Override
            public String name() {
                return name;
            }

            @Override
            public Tokenizer create() {
                return new UAX29URLEmailTokenizer();
            }
        });
    }

    private static TokenFilterFactory patternCapture(String name, Settings settings) {
        List<String> regexes = settings.getAsList("patterns");
        Pattern[] patterns = regexes.stream().map(Pattern::compile).toArray(Pattern[]::new);
        boolean preserveOriginal = settings.getAsBoolean("preserve_original", true);
        return filter(name, input -> new PatternCaptureGroupTokenFilter(input, preserveOriginal, patterns));
    }

    private static TokenFilterFactory filter(String name, java.util.function.UnaryOperator<TokenStream> wrap) {
        return new TokenFilterFactory() {
            @Override
            public String name() {
                return name;
            }

            @Override
            public TokenStream create(TokenStream input) {
                return wrap.apply(input);
            }
        };
    }
}
