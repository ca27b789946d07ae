"""The names of Spark's built-in functions that SQL a user writes may call. Django-free.

Kept here, below both users of the list: the worker's sandbox (runtime.spark.sandbox, which
refuses any other function in Spark's analyzed plan) and the catalog's check of row filters
and column masks (catalog.core.policies, which allows a subset of it)."""

from __future__ import annotations

#: Spark 3.5's built-in functions a user statement may call, by Spark's own groups
#: (`ExpressionInfo.getGroup`). Left out: reflect and java_method (they call any static Java
#: method in the worker), the xpath family (an XML parser over text the user controls).
#: A function Spark adds in a later version is refused until it is listed here. The scalar
#: functions first, then the aggregate, window and generator functions by themselves (a
#: policy may call none of those: catalog.core.policies).
_SCALAR_FUNCTION_NAMES = """
    array array_append array_compact array_contains array_distinct array_except array_insert
    array_intersect array_join array_max array_min array_position array_prepend array_remove
    array_repeat array_union arrays_overlap arrays_zip flatten get sequence shuffle slice
    sort_array

    & ^ bit_count bit_get getbit shiftright shiftrightunsigned | ~
    array_size cardinality concat reverse size
    coalesce if ifnull nanvl nullif nvl nvl2 when
    bigint binary boolean cast date decimal double float int smallint string timestamp tinyint
    from_csv schema_of_csv to_csv

    add_months convert_timezone curdate current_date current_timestamp current_timezone
    date_add date_diff date_format date_from_unix_date date_part date_sub date_trunc dateadd
    datediff datepart day dayofmonth dayofweek dayofyear extract from_unixtime
    from_utc_timestamp hour last_day localtimestamp make_date make_dt_interval make_interval
    make_timestamp make_timestamp_ltz make_timestamp_ntz make_ym_interval minute month
    months_between next_day now quarter second session_window timestamp_micros
    timestamp_millis timestamp_seconds to_date to_timestamp to_timestamp_ltz
    to_timestamp_ntz to_unix_timestamp to_utc_timestamp trunc try_to_timestamp unix_date
    unix_micros unix_millis unix_seconds unix_timestamp weekday weekofyear window
    window_time year

    crc32 hash md5 sha sha1 sha2 xxhash64
    from_json get_json_object json_array_length json_object_keys json_tuple schema_of_json
    to_json
    aggregate array_sort exists filter forall map_filter map_zip_with reduce transform
    transform_keys transform_values zip_with
    element_at map map_concat map_contains_key map_entries map_from_arrays map_from_entries
    map_keys map_values str_to_map try_element_at

    % * + - / abs acos acosh asin asinh atan atan2 atanh bin bround cbrt ceil ceiling conv
    cos cosh cot csc degrees div e exp expm1 factorial floor greatest hex hypot least ln log
    log10 log1p log2 mod negative pi pmod positive pow power radians rand randn random rint
    round sec shiftleft sign signum sin sinh sqrt tan tanh try_add try_divide try_multiply
    try_subtract unhex width_bucket

    aes_decrypt aes_encrypt assert_true bitmap_bit_position bitmap_bucket_number bitmap_count
    current_catalog current_database current_schema current_user equal_null
    hll_sketch_estimate hll_union input_file_block_length input_file_block_start
    input_file_name monotonically_increasing_id raise_error spark_partition_id
    try_aes_decrypt typeof user uuid version

    ! < <= <=> = == > >= and ilike in isnan isnotnull isnull like not or regexp regexp_like
    rlike

    ascii base64 bit_length btrim char char_length character_length chr concat_ws contains
    decode elt encode endswith find_in_set format_number format_string initcap instr lcase
    left len length levenshtein locate lower lpad ltrim luhn_check mask octet_length overlay
    position printf regexp_count regexp_extract regexp_extract_all regexp_instr
    regexp_replace regexp_substr repeat replace right rpad rtrim sentences soundex space split
    split_part startswith substr substring substring_index to_binary to_char to_number
    to_varchar translate trim try_to_binary try_to_number ucase unbase64 upper

    named_struct struct
    parse_url url_decode url_encode
    range sql_keywords
"""
#: The aggregate functions of the list (Spark's group agg_funcs).
_AGGREGATE_NAMES = """
    any any_value approx_count_distinct approx_percentile array_agg avg bit_and bit_or bit_xor
    bitmap_construct_agg bitmap_or_agg bool_and bool_or collect_list collect_set corr count
    count_if count_min_sketch covar_pop covar_samp every first first_value grouping
    grouping_id histogram_numeric hll_sketch_agg hll_union_agg kurtosis last last_value max
    max_by mean median min min_by mode percentile percentile_approx regr_avgx regr_avgy
    regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy regr_syy skewness some std
    stddev stddev_pop stddev_samp sum try_avg try_sum var_pop var_samp variance
"""
AGGREGATE_FUNCTIONS: frozenset[str] = frozenset(_AGGREGATE_NAMES.split())
#: Its window functions (window_funcs) and generators (generator_funcs).
_WINDOW_NAMES = """
    cume_dist dense_rank lag lead nth_value ntile percent_rank rank row_number
"""
WINDOW_FUNCTIONS: frozenset[str] = frozenset(_WINDOW_NAMES.split())
_GENERATOR_NAMES = """
    explode explode_outer inline inline_outer posexplode posexplode_outer stack
"""
GENERATOR_FUNCTIONS: frozenset[str] = frozenset(_GENERATOR_NAMES.split())
ALLOWED_FUNCTIONS: frozenset[str] = (
    frozenset(_SCALAR_FUNCTION_NAMES.split())
    | AGGREGATE_FUNCTIONS
    | WINDOW_FUNCTIONS
    | GENERATOR_FUNCTIONS
)
